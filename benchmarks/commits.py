"""Committing long runs' files as they land, within what a working session's submission may weigh.

A long run commits what it produces (a result, a checkpoint) from a background thread, in a checkout someone
may be working in: :func:`commit_paths` commits just those paths, waits out another git command's lock, and
reports rather than raises; :func:`committing` calls a commit every few minutes and once more at the end.

A session submits the commits after the main it started from, and a submission whose diffs add up to more
than 256 MiB is refused whole: every result it carried is lost with it (a session of issue #31 was lost so,
after committing a ~36 MB snapshot of each run in flight every few steps). Snapshots and cold-start
checkpoints are binary files of 3-36 MB, so ``benchmarks/ablation.py --commit`` weighs each such commit
first and skips it when the session would pass its budget; results (small JSON) are always committed.

Bytes are counted as a diff of whole files would count them: a file added or deleted counts its size, a
changed one its old size plus its new (an upper bound for text, the exact count for a binary).

    base = session_base(root)                    # the commit this checkout's main began at
    committed_bytes(root, base)                  # what the commits since then weigh
    staged_bytes(root, ["results/inflight/k"])   # what committing the staged paths would add
    over_budget(root, ["results/inflight/k"], 200.0, ["results/inflight"])  # None, or why not to commit
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

MIB = 1 << 20


def _git(root: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True,
                          input=stdin).stdout


def session_base(root: Path) -> str:
    """The commit this checkout's current branch started at (the oldest entry of its reflog: where the
    session's clone or checkout put it); HEAD when the branch has no reflog. A checkout that lives on past a
    landed submission counts from further back, which errs on the safe side."""
    branch = subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=root, capture_output=True,
                            text=True).stdout.strip()  # empty on a detached HEAD
    log = _git(root, "reflog", "show", "--format=%H", branch, "--").split() if branch else []
    return log[-1] if log else _git(root, "rev-parse", "HEAD").strip()


def blob_bytes(root: Path, ids: Iterable[str]) -> int:
    """The total size of these blobs (the all-zero id of an absent side counts 0)."""
    want = [i for i in ids if i and i.strip("0")]
    if not want:
        return 0
    out = _git(root, "cat-file", "--batch-check=%(objectsize)", stdin="\n".join(want) + "\n")
    return sum(int(x) for x in out.split() if x.isdigit())


def _raw_ids(raw: str) -> list[str]:
    """Old and new blob ids of each line of ``git diff --raw`` output (``:mode mode old new status\\tpath``)."""
    ids = []
    for line in raw.splitlines():
        if line.startswith(":"):
            fields = line.split("\t", 1)[0].split()
            ids += fields[2:4]
    return ids


def committed_bytes(root: Path, base: str) -> int:
    """What the commits after ``base`` up to HEAD weigh (every changed file of every commit, old + new)."""
    raw = _git(root, "log", "--raw", "--no-renames", "--no-abbrev", "--format=", f"{base}..HEAD", "--")
    return blob_bytes(root, _raw_ids(raw))


def staged_bytes(root: Path, paths: Sequence[str]) -> int:
    """What committing the staged changes under ``paths`` would add."""
    raw = _git(root, "diff", "--cached", "--raw", "--no-renames", "--no-abbrev", "--", *paths)
    return blob_bytes(root, _raw_ids(raw))


def indexed_bytes(root: Path, paths: Sequence[str]) -> int:
    """The size of the files under ``paths`` as staged (what deleting them later would weigh)."""
    out = _git(root, "ls-files", "-s", "--", *paths)
    return blob_bytes(root, [line.split()[1] for line in out.splitlines() if line.strip()])


def over_budget(root: Path, paths: Sequence[str], budget_mib: float, reserve: Sequence[str] = ()) -> str | None:
    """Why committing the staged ``paths`` would take the session's commits past ``budget_mib``; None when it
    would not. ``reserve``: paths whose staged files a later commit deletes (a run's snapshot, when its result
    lands), so their deletion is counted now."""
    base = session_base(root)
    done, adds = committed_bytes(root, base), staged_bytes(root, paths)
    later = indexed_bytes(root, reserve) if reserve else 0
    if done + adds + later <= budget_mib * MIB:
        return None
    return (f"the commits since {base[:7]} weigh {done / MIB:.1f} MiB, this one would add {adds / MIB:.1f} and "
            f"removing the snapshots later {later / MIB:.1f}, past the budget of {budget_mib:g} MiB")


_GIT = threading.Lock()


def commit_paths(root: Path, paths: Sequence[Path], message: str, budget_mib: float | None = None,
                 reserve: Path | None = None) -> bool:
    """Commit these files or folders (a deleted one included) of the repository at ``root`` when they changed;
    returns whether a commit was made. Commits only these paths, so it can run in a checkout someone is
    working in; a git lock held by them is waited out, and a commit that still fails is reported, not raised
    (the file stays in the working tree and the next commit takes it). ``budget_mib``: skip the commit (and
    say so) when the session's commits would weigh more, ``reserve``'s files counted as their deletion to
    come too (:func:`over_budget`)."""
    rels = [str(p.relative_to(root)) for p in paths if p.exists() or _tracked(root, p)]
    if not rels:
        return False  # nothing there and nothing to delete (and a bare `git add -A --` would take everything)
    rel = rels[0]
    with _GIT:
        for attempt in range(20):
            add = subprocess.run(["git", "add", "-A", "--", *rels], cwd=root, capture_output=True, text=True)
            staged = subprocess.run(["git", "diff", "--cached", "--quiet", "--", *rels], cwd=root)
            if add.returncode == 0 and staged.returncode == 0:
                return False
            over = add.returncode == 0 and budget_mib is not None and over_budget(
                root, rels, budget_mib, [str(reserve.relative_to(root))] if reserve else [])
            if over:
                subprocess.run(["git", "reset", "-q", "--", *rels], cwd=root, capture_output=True)
                print(f"[commit] not committing {rel}: {over}; it stays on this machine", file=sys.stderr,
                      flush=True)
                return False
            done = add.returncode == 0 and subprocess.run(
                ["git", "commit", "-q", "-m", message, "--", *rels], cwd=root, capture_output=True, text=True)
            if done and done.returncode == 0:
                return True
            err = (done.stderr if done else add.stderr).strip()
            if "index.lock" not in err:
                break
            time.sleep(3)
        print(f"[commit] could not commit {rel}: {err}", file=sys.stderr, flush=True)
        return False


def _tracked(root: Path, path: Path) -> bool:
    out = subprocess.run(["git", "ls-files", "--", str(path.relative_to(root))], cwd=root, capture_output=True,
                         text=True)
    return bool(out.stdout.strip())


def committed_as_is(root: Path, path: Path) -> bool:
    """Whether ``path`` is tracked and unchanged since HEAD."""
    changed = subprocess.run(["git", "status", "--porcelain", "--", str(path.relative_to(root))], cwd=root,
                             capture_output=True, text=True)
    return _tracked(root, path) and changed.returncode == 0 and not changed.stdout.strip()


def exit_on_sigterm() -> None:
    """Make SIGTERM (``kill``, a job scheduler's stop) exit through Python, so that :func:`committing`'s last
    commit runs, as it does on Ctrl-C; by default SIGTERM ends the process where it stands."""
    import signal

    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


@contextmanager
def committing(every_s: float, enabled: bool, commit: Callable[[], None]) -> Iterator[None]:
    """While the body runs, call ``commit`` every ``every_s`` seconds, and once more at the end (also when the
    body fails): a long cold start or run then goes on from the last commit on another machine. A commit
    that fails is reported and tried again next time, never raised into the body."""
    if not enabled:
        yield
        return
    stop = threading.Event()

    def guarded() -> None:
        try:
            commit()
        except Exception as e:  # noqa: BLE001 - a failed snapshot must not stop the training it watches
            print(f"[commit] commit failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)

    def loop() -> None:
        while not stop.wait(every_s):
            guarded()

    thread = threading.Thread(target=loop, daemon=True, name="commits")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        guarded()
