"""A sandbox change, before and after: EvalPlus verdicts per second and per-execution overhead, old and
new code in the same run.

    .venv/bin/python benchmarks/bench_sandbox_change.py --old 25b3403 [--new WORKTREE_OR_REV]
        [--repeats 3] [--backends local docker] [--runs 30] [--limit N] [--out results.json]

``--old`` and ``--new`` each name a revision, checked out into a temporary ``git worktree`` (removed at
the end), or a directory holding a checkout, measured live. ``--new`` is by default this working tree,
uncommitted changes and untracked files included, frozen into a temporary worktree when the script
starts (edits made meanwhile cannot reach the measurements). Every measurement runs in a fresh
subprocess of this script whose cwd and PYTHONPATH are that tree and which imports that tree's
``envs`` first (asserted: ``envs.__file__`` lies in it), so the editable install never stands in for
it; the harness (``benchmarks``) is always this checkout's. Each repeat runs old and new alternately
per backend, the order flipped every repeat so that neither side always runs first. Per backend B:
  a. EvalPlus: load the HumanEval+ problems, build ``EvalPlusVerifier("humaneval", mode="strict",
     sandbox_config=SandboxConfig(backend=B))``, check one task (untimed warm-up), then time only
     ``check_many`` of every task's ``prompt + canonical_solution`` with 2 workers. Excluded from the
     time on both sides alike: process start, problem loading, the zygote / container pool start and
     the computation of the expected outputs; included: reading each task's cached expected outputs.
     Recorded: wall seconds, verdicts/s and the (task_id, passed) list.
  b. Per-execution overhead: ``make_sandbox(SandboxConfig(backend=B))``, one warm-up, then ``--runs``
     sequential ``run("print(1)")`` (docker: a third as many, after the pool has filled): median and
     p90 ms; local also with the EvalPlus preload (numpy + evalplus.eval) running
     ``import numpy, evalplus.eval``, as benchmarks/bench_sandbox.py does.
The expected-output cache ($LOPD_CACHE_DIR, default ~/.cache/lopd), shared by both trees, is filled
first by this process (an untimed pass over the tasks). Both sides must give the same (task_id, passed)
lists: every task whose verdict is not the same in every run of both sides is listed (and the exit
status is 1), never fatal; a failed measurement is reported the same way. A markdown table goes to stdout,
everything (machine, load average before/after, revisions, every figure) to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the parent's imports (data dir, cache, docker check); a child's: child_setup
MARK = "BENCH-RESULT "
DATASET = "humaneval"
SIDES = ("old", "new")


# ---------------------------------------------------------------- child: one measurement in one tree


def child_setup(tree: str) -> str:
    """This checkout's ``benchmarks`` package, then the measured tree's ``envs`` (asserted); its path."""
    import benchmarks  # noqa: F401  (the harness stays ours whatever the tree)

    sys.path.insert(0, tree)
    import envs

    where = Path(envs.__file__).resolve()
    assert where.is_relative_to(Path(tree).resolve()), f"envs imported from {where}, not from {tree}"
    return str(where)


def child_evalplus(backend: str, limit: int | None) -> dict:
    from envs.evalplus import data as ep_data
    from envs.evalplus.verifier import EvalPlusVerifier
    from envs.sandbox import SandboxConfig

    problems = ep_data.load_problems(DATASET)
    items = [(t, p["prompt"] + p["canonical_solution"]) for t, p in problems.items()][:limit]
    cache_file = getattr(ep_data, "_cache_file", None)
    cold = [t for t, _ in items if cache_file and not cache_file(DATASET, t).exists()]
    with EvalPlusVerifier(DATASET, mode="strict", sandbox_config=SandboxConfig(backend=backend)) as v:
        v.check(*items[0])  # warm-up: zygote / pool start
        t0 = time.perf_counter()
        res = v.check_many(items, workers=2)
        dt = time.perf_counter() - t0
    return {
        "seconds": round(dt, 3),
        "verdicts_per_s": round(len(items) / dt, 3),
        "verdicts": [[r.task_id, bool(r.passed)] for r in res],
        "failed_statuses": {r.task_id: [r.base_status, r.plus_status] for r in res if not r.passed},
        "errors": {r.task_id: r.error for r in res if r.error},
        "cache_cold_tasks": cold,
    }


def child_overhead(backend: str, runs: int) -> dict:
    from benchmarks.bench_sandbox import HEAVY, PROGRAM, ok, timed
    from envs.sandbox import SandboxConfig, make_sandbox

    n = runs if backend == "local" else max(1, runs // 3)
    out = {}
    with make_sandbox(SandboxConfig(backend=backend)) as sb:
        if backend == "docker":
            time.sleep(3)  # let the pool fill before timing (as bench_sandbox.py)
        out["print(1)"] = timed(lambda: ok(sb.run(PROGRAM)), n)
    if backend == "local":
        with make_sandbox(SandboxConfig(backend="local"), preload=("numpy", "evalplus.eval")) as sb:
            out["preloaded: import numpy, evalplus.eval"] = timed(lambda: ok(sb.run(HEAVY)), n)
    return {"cases": out}


def child_main(spec: dict) -> int:
    envs_file = child_setup(spec["tree"])
    if spec["what"] == "evalplus":
        res = child_evalplus(spec["backend"], spec["limit"])
    else:
        res = child_overhead(spec["backend"], spec["runs"])
    print(MARK + json.dumps({"envs_file": envs_file, **res}), flush=True)
    return 0


# ---------------------------------------------------------------- parent: trees, schedule, summary


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@contextlib.contextmanager
def worktree(rev: str):
    """A detached ``git worktree`` of ``rev`` in a temporary directory, removed on exit."""
    path = Path(tempfile.mkdtemp(prefix="bench-sandbox-change-")) / "tree"
    try:
        git("worktree", "add", "--detach", str(path), rev)
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, capture_output=True)
        git("worktree", "prune")
        with contextlib.suppress(OSError):
            path.parent.rmdir()


@contextlib.contextmanager
def snapshot():
    """This working tree as it is now (HEAD, its uncommitted changes and untracked files) in a temporary
    worktree, so that edits made while the benchmark runs do not reach the measurements."""
    with worktree("HEAD") as path:
        diff = subprocess.run(["git", "diff", "HEAD", "--binary"], cwd=ROOT, check=True, capture_output=True)
        if diff.stdout:
            subprocess.run(["git", "apply", "--whitespace=nowarn"], cwd=path, input=diff.stdout, check=True)
        for name in filter(None, git("ls-files", "--others", "--exclude-standard", "-z").split("\0")):
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, path / name)
        yield path


def describe(tree: Path, rev: str | None) -> dict:
    """Revision of a tree; for a working tree also whether (and how) it differs from its HEAD."""
    asked = rev or f"working tree {ROOT} (snapshot)"
    d = {"path": str(tree), "asked": asked, "head": git("rev-parse", "HEAD", cwd=tree)}
    if rev is None or Path(rev).is_dir():
        diff = git("diff", "HEAD", cwd=tree)
        status = subprocess.run(["git", "status", "--porcelain"], cwd=tree, capture_output=True, text=True)
        d["dirty_files"] = status.stdout.splitlines()
        d["diff_sha1"] = hashlib.sha1(diff.encode()).hexdigest() if diff else None
    return d


def fill_cache(limit: int | None) -> int:
    """Expected outputs of the measured tasks computed now (untimed), in the shared cache."""
    from envs.evalplus import data as ep_data

    tasks = list(ep_data.load_problems(DATASET))[:limit]
    for t in tasks:
        ep_data.expected_outputs(DATASET, t)
    return len(tasks)


def measure(tree: Path, what: str, backend: str, args) -> dict:
    """One measurement in a fresh subprocess of this script, cwd and PYTHONPATH that tree."""
    from envs.data import data_dir

    spec = {"tree": str(tree), "what": what, "backend": backend, "limit": args.limit, "runs": args.runs}
    env = dict(os.environ, PYTHONPATH=str(tree), LOPD_DATA_DIR=str(data_dir().resolve()))
    try:
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=args.child_timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.child_timeout:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    if proc.returncode != 0 or not lines:
        return {"error": f"exit {proc.returncode}: {(proc.stderr or proc.stdout)[-2000:]}"}
    return json.loads(lines[-1][len(MARK) :])


def docker_skip_reason() -> str | None:
    from envs.sandbox.docker_backend import docker_unavailable_reason

    return docker_unavailable_reason()


def run_schedule(trees: dict[str, Path], backends: list[str], args) -> dict:
    """results[backend][side]["evalplus" | "overhead"] = one entry per repeat."""
    results = {b: {s: {"evalplus": [], "overhead": []} for s in SIDES} for b in backends}
    for rep in range(args.repeats):
        order = SIDES if rep % 2 == 0 else SIDES[::-1]
        for b in backends:
            for side in order:
                for what in ("evalplus", "overhead"):
                    r = measure(trees[side], what, b, args)
                    results[b][side][what].append(r)
                    print(f"repeat {rep + 1} {b:<6} {side} {what:<8} {brief(what, r)}", flush=True)
    return results


def brief(what: str, r: dict) -> str:
    if "error" in r:
        return "ERROR " + (r["error"].strip().splitlines() or [""])[-1][:200]
    if what == "evalplus":
        passed = sum(p for _, p in r["verdicts"])
        return f"{r['seconds']:.2f} s, {r['verdicts_per_s']:.2f}/s, {passed}/{len(r['verdicts'])} pass"
    return ", ".join(f"{k}: median {v['median_ms']} ms p90 {v['p90_ms']} ms" for k, v in r["cases"].items())


def verdict_diffs(res: dict) -> list[dict]:
    """Every task whose ``passed`` is not the same in all runs of both sides: its value per repeat on
    each side, and whether old and new differ in every repeat or it varies between repeats."""
    runs = {s: [dict(map(tuple, r["verdicts"])) for r in res[s]["evalplus"] if "verdicts" in r]
            for s in SIDES}
    tasks = sorted({t for s in SIDES for v in runs[s] for t in v})
    diffs = []
    for t in tasks:
        seen = {s: [v.get(t) for v in runs[s]] for s in SIDES}
        if len({x for s in SIDES for x in seen[s]}) > 1:
            steady = all(len(set(seen[s])) == 1 for s in SIDES)
            kind = "old and new differ in every repeat" if steady else "varies between repeats"
            diffs.append({"task_id": t, **seen, "kind": kind})
    return diffs


def summarize(backend: str, res: dict) -> dict:
    vps = {s: [r.get("verdicts_per_s") for r in res[s]["evalplus"]] for s in SIDES}
    ok = {s: [x for x in vps[s] if x] for s in SIDES}
    med = {s: statistics.median(ok[s]) if ok[s] else None for s in SIDES}
    per_rep = [round(n / o, 3) for o, n in zip(vps["old"], vps["new"]) if o and n]
    overhead = {}
    for s in SIDES:
        for r in res[s]["overhead"]:
            for k, v in r.get("cases", {}).items():
                overhead.setdefault(k, {}).setdefault(s, []).append(v["median_ms"])
    return {
        "backend": backend,
        "old_median_vps": med["old"],
        "new_median_vps": med["new"],
        "ratio_new_old": round(med["new"] / med["old"], 3) if med["old"] and med["new"] else None,
        "per_repeat_ratios": per_rep,
        "overhead_median_ms": {
            k: {s: statistics.median(v) for s, v in d.items()} for k, d in overhead.items()
        },
    }


def fmt(x, spec: str = ".2f") -> str:
    return "n/a" if x is None else format(x, spec)


def ratios(xs: list[float]) -> str:
    return ", ".join(f"{r:.3f}" for r in xs) + (f" (median {statistics.median(xs):.3f})" if xs else "")


def table(summaries: list[dict]) -> str:
    rows = [
        "| backend | old verdicts/s (median) | new verdicts/s (median) | new/old | per-repeat new/old "
        "| overhead print(1) median ms old / new | overhead preloaded import median ms old / new |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        o = s["overhead_median_ms"]
        cells = []
        for k in ("print(1)", "preloaded: import numpy, evalplus.eval"):
            d = o.get(k, {})
            cells.append(f"{fmt(d.get('old'), '.1f')} / {fmt(d.get('new'), '.1f')}" if d else "—")
        rows.append(
            f"| {s['backend']} | {fmt(s['old_median_vps'])} | {fmt(s['new_median_vps'])} "
            f"| {fmt(s['ratio_new_old'], '.3f')} | {ratios(s['per_repeat_ratios'])} "
            f"| {cells[0]} | {cells[1]} |"
        )
    return "\n".join(rows)


def resolve_tree(spec: str | None, stack: contextlib.ExitStack) -> Path:
    """None: this working tree (a snapshot); a directory: itself, live; anything else: a revision."""
    if spec is None:
        return stack.enter_context(snapshot())
    if Path(spec).is_dir():
        return Path(spec).resolve()
    return stack.enter_context(worktree(spec))


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", help="the code before the change: revision or checkout directory (required)")
    ap.add_argument("--new", default=None, help="checkout directory or revision (default: this working tree)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backends", nargs="+", default=["local", "docker"], choices=["local", "docker"])
    ap.add_argument("--runs", type=int, default=30, help="sequential print(1) runs per overhead figure")
    ap.add_argument("--limit", type=int, default=None, help="only the first N HumanEval+ tasks")
    ap.add_argument("--out", type=Path, default=None, help="write every figure here as JSON")
    ap.add_argument("--child-timeout", type=float, default=1800.0, help=argparse.SUPPRESS)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is None and not args.old:
        ap.error("--old is required")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.child is not None:
        return child_main(json.loads(args.child))
    backends = list(args.backends)
    skipped = {}
    if "docker" in backends and (reason := docker_skip_reason()):
        print(f"docker skipped: {reason}", file=sys.stderr)
        skipped["docker"], backends = reason, [b for b in backends if b != "docker"]
    load_before, started = os.getloadavg(), datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"expected outputs of {fill_cache(args.limit)} tasks in the cache (untimed pass)", flush=True)
    with contextlib.ExitStack() as stack:
        trees = {"old": resolve_tree(args.old, stack), "new": resolve_tree(args.new, stack)}
        revisions = {"old": describe(trees["old"], args.old), "new": describe(trees["new"], args.new)}
        results = run_schedule(trees, backends, args)
    summaries = []
    for b in backends:
        s = summarize(b, results[b])
        s["verdict_diffs"] = verdict_diffs(results[b])
        summaries.append(s)
    failed = [f"{b} {s} {w} repeat {i + 1}" for b in backends for s in SIDES for w in ("evalplus", "overhead")
              for i, r in enumerate(results[b][s][w]) if "error" in r]
    report(summaries, failed)
    doc = {
        "command": [sys.executable, *sys.argv] if argv is None else ["bench_sandbox_change.py", *argv],
        "date": started,
        "machine": {"node": platform.node(), "nproc": os.cpu_count(), "python": sys.version.split()[0],
                    "platform": platform.platform(), "load_avg_before": load_before,
                    "load_avg_after": os.getloadavg()},
        "revisions": revisions,
        "settings": {"dataset": DATASET, "mode": "strict", "workers": 2, "repeats": args.repeats,
                     "runs": args.runs, "limit": args.limit, "backends": backends, "skipped": skipped},
        "summary": summaries,
        "failed_measurements": failed,
        "results": results,
    }
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1))
        print(f"wrote {args.out}")
    return 1 if failed or any(s["verdict_diffs"] for s in summaries) else 0


def report(summaries: list[dict], failed: list[str]) -> None:
    print()
    print(table(summaries))
    for s in summaries:
        d = s["verdict_diffs"]
        if not d:
            print(f"{s['backend']}: identical (task_id, passed) on both sides and every repeat")
        else:
            print(f"{s['backend']}: {len(d)} tasks whose verdict differs between runs: {json.dumps(d)}")
    for f in failed:
        print(f"measurement failed: {f}")


if __name__ == "__main__":
    sys.exit(main())
