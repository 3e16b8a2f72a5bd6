"""In-flight ablation runs that travel with the repository (issue #31).

A run of 1,600 generations outlasts a working session on 2 shared cores, and its checkpoints live under the
ignored ``runs/``, so on its own a run only finishes in the session that starts it. With ``--commit``,
benchmarks/ablation.py copies each training run's newest checkpoint, with the metrics and traces that
checkpoint covers, to ``inflight/<key>/`` of the result folder and commits it; a later start of the same run
(same key: the same settings), on any machine, copies it back first and the trainer resumes from it. The
snapshot goes in the commit that adds the run's result.

    step = snapshot(run_dir, dest)   # the step copied, or None when dest already holds one as new
    restore(dest, run_dir)           # True when dest was newer than run_dir's own checkpoint
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from harness.training.checkpoint import CHECKPOINTS, latest_checkpoint, read_trainer_state

FILES = ("demo_spec.json", "config.yaml")
"""What the pipeline needs beside the checkpoint to know the run and resume it (rather than retrain it)."""
LOGS = {"metrics.jsonl": "metrics_offset", "traces.jsonl": "traces_offset"}
"""Logs, cut at the offsets the checkpoint records (what a resume keeps of them)."""
MARK = "snapshot.json"


def checkpoint_step(run_dir: Path) -> int:
    """The step of ``run_dir``'s newest complete checkpoint; -1 when it has none."""
    ck = latest_checkpoint(run_dir) if run_dir.is_dir() else None
    return int(read_trainer_state(ck)["step"]) if ck is not None else -1


def snapshot_step(dest: Path) -> int:
    """The step of the snapshot in ``dest``; -1 when there is none (or it is unreadable)."""
    try:
        return int(json.loads((dest / MARK).read_text())["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return -1


def generations_of(folder: Path, snapshot: bool = True) -> int:
    """Generations a snapshot (``snapshot``) or a run folder's newest checkpoint holds; 0 when none."""
    if snapshot:
        try:
            return int(json.loads((folder / MARK).read_text())["generations"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0
    ck = latest_checkpoint(folder) if folder.is_dir() else None
    return int(read_trainer_state(ck)["generations"]) if ck is not None else 0


def snapshot(run_dir: Path, dest: Path, tries: int = 3) -> int | None:
    """Replace ``dest`` with ``run_dir``'s newest checkpoint and the logs it covers, when that checkpoint is
    newer than ``dest``'s; returns its step, else None. Safe beside the training process: the copy is made
    in a staging folder and renamed into place, and a checkpoint pruned mid-copy (a newer one was published)
    is copied again."""
    for _ in range(tries):
        ck = latest_checkpoint(run_dir) if run_dir.is_dir() else None
        if ck is None or int(read_trainer_state(ck)["step"]) <= snapshot_step(dest):
            return None
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            shutil.copytree(ck, tmp / CHECKPOINTS / ck.name)
        except (FileNotFoundError, shutil.Error):
            shutil.rmtree(tmp, ignore_errors=True)
            continue
        state = read_trainer_state(tmp / CHECKPOINTS / ck.name)  # the copy's own, whatever was published since
        (tmp / CHECKPOINTS / "latest").write_text(ck.name + "\n")
        for name in FILES:
            if (run_dir / name).is_file():  # a run the trainer started on its own has no demo_spec.json
                shutil.copy2(run_dir / name, tmp / name)
        for name, offset in LOGS.items():
            _copy_head(run_dir / name, tmp / name, int(state[offset]))
        (tmp / MARK).write_text(json.dumps({"run": run_dir.name, "step": int(state["step"]),
                                            "generations": int(state["generations"]),
                                            "at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}) + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
        return int(state["step"])
    raise RuntimeError(f"{run_dir}: its checkpoint kept changing while it was copied ({tries} tries)")


def _copy_head(src: Path, dst: Path, n: int) -> None:
    with open(src, "rb") as f:
        head = f.read(n)
    if len(head) < n:
        raise ValueError(f"{src} is shorter ({len(head)} bytes) than its checkpoint records ({n})")
    dst.write_bytes(head)


def restore(src: Path, run_dir: Path) -> bool:
    """Put the snapshot in ``src`` in place of ``run_dir`` when it is further on than ``run_dir``'s own newest
    checkpoint (a folder this machine trained further is kept); returns whether it did."""
    if snapshot_step(src) <= checkpoint_step(run_dir):
        return False
    if run_dir.is_symlink():
        run_dir.unlink()  # a link to another folder: never delete what it names
    elif run_dir.exists():
        shutil.rmtree(run_dir)
    shutil.copytree(src, run_dir, ignore=shutil.ignore_patterns(MARK))
    return True
