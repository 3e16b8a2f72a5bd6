"""Reading traces into per-group statistics: one process, or several over byte ranges (:mod:`.parallel`)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from envs.trace import TraceError, iter_records
from harness.stats.episodes import GroupBy, GroupStats, add_records
from harness.stats.parallel import collect_parallel, default_workers


def trace_file(path: str | os.PathLike) -> Path:
    """``path`` itself, or ``path/traces.jsonl`` when it is a run directory (as ``lopd eval`` writes)."""
    path = Path(path)
    if path.is_dir():
        if not (path / "traces.jsonl").is_file():
            raise FileNotFoundError(f"{path} is a directory without a traces.jsonl")
        return path / "traces.jsonl"
    return path


def collect(paths: Iterable[str | os.PathLike], by: GroupBy = "run", *, skip_bad: bool = False,
            errors: list[TraceError] | None = None, success_threshold: float = 1.0,
            workers: int | None = None) -> dict[str, GroupStats]:
    """Stream every episode of ``paths`` into per-group statistics.

    A path may be a run directory (its ``traces.jsonl`` is read). A corrupt line raises
    :class:`TraceError` (file and line) unless ``skip_bad``; skipped lines are appended to ``errors``
    so the caller can report them. ``workers`` processes read the input in parallel; None picks
    :func:`harness.stats.parallel.default_workers` (2 for large inputs). The result is the same
    for any number of workers.
    """
    files = [trace_file(p) for p in paths]
    workers = default_workers(files) if workers is None else workers
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if workers > 1:
        return collect_parallel(files, by, workers, skip_bad=skip_bad, errors=errors,
                                success_threshold=success_threshold)
    groups: dict[str, GroupStats] = {}
    for path in files:
        records = iter_records(path, on_error="skip" if skip_bad else "raise", errors=errors)
        add_records(groups, path, records, by, skip_bad=skip_bad, errors=errors, success_threshold=success_threshold)
    return groups
