"""Crash-safe training checkpoints.

Layout of ``RUN/checkpoints/step_000010/``::

    student/         the student as a plain HF model directory (config, safetensors, tokenizer)
    optimizer.pt     the student's optimiser state
    learner.pt       learner state (composer, its optimiser, dual variable, EMA teacher ...)
    rng_rank{r}.pt   python / numpy / torch RNG states of each rank
    trainer.json     step, generations, data order, metric/trace file offsets
    files/           learner files (the experience bank)

A checkpoint is written into a temporary directory and renamed into place, then
``checkpoints/latest`` (a one-line file) is replaced atomically; a run killed at any moment
resumes from the last complete checkpoint::

    ck = latest_checkpoint("runs/x")          # Path or None
    state = read_trainer_state(ck)
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

CHECKPOINTS = "checkpoints"


def step_dir(run_dir: str | os.PathLike, step: int) -> Path:
    return Path(run_dir) / CHECKPOINTS / f"step_{step:06d}"


def staging_dir(run_dir: str | os.PathLike, step: int) -> Path:
    """Where a checkpoint is assembled before it is renamed into place."""
    return Path(run_dir) / CHECKPOINTS / f".tmp_step_{step:06d}"


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def publish(run_dir: str | os.PathLike, step: int, keep: int) -> Path:
    """Rename the staged checkpoint of ``step`` into place, point ``latest`` at it, prune old ones."""
    root = Path(run_dir) / CHECKPOINTS
    final, tmp = step_dir(run_dir, step), staging_dir(run_dir, step)
    if final.exists():
        shutil.rmtree(final)
    _fsync_tree(tmp)
    os.replace(tmp, final)
    pointer = root / "latest.tmp"
    pointer.write_text(final.name + "\n", encoding="utf-8")
    with open(pointer, "rb") as f:
        os.fsync(f.fileno())
    os.replace(pointer, root / "latest")
    if keep > 0:
        done = sorted(p for p in root.glob("step_*") if p.is_dir())
        for old in done[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    return final


def _fsync_tree(path: Path) -> None:
    for p in path.rglob("*"):
        if p.is_file():
            with open(p, "rb") as f:
                os.fsync(f.fileno())


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint of a run (or ``run_dir`` itself if it is one), else None."""
    run_dir = Path(run_dir)
    if (run_dir / "trainer.json").is_file():
        return run_dir
    pointer = run_dir / CHECKPOINTS / "latest"
    if pointer.is_file():
        cand = run_dir / CHECKPOINTS / pointer.read_text(encoding="utf-8").strip()
        if (cand / "trainer.json").is_file():
            return cand
    done = sorted(p for p in (run_dir / CHECKPOINTS).glob("step_*") if (p / "trainer.json").is_file()) \
        if (run_dir / CHECKPOINTS).is_dir() else []
    return done[-1] if done else None


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")


def read_trainer_state(ckpt: Path) -> dict[str, Any]:
    try:
        return json.loads((ckpt / "trainer.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"checkpoint {ckpt} has no readable trainer.json: {e}") from None


def clear_staging(run_dir: str | os.PathLike) -> None:
    """Remove half-written checkpoints a killed run left behind."""
    root = Path(run_dir) / CHECKPOINTS
    if root.is_dir():
        for p in root.glob(".tmp_step_*"):
            shutil.rmtree(p, ignore_errors=True)
