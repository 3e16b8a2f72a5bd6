"""Training metrics: one JSON object per line, optionally mirrored to TensorBoard.

Every record carries ``step`` and ``generations`` (episodes played so far), which is what the
learning-curve plot (:func:`harness.stats.plots.plot_learning_curves`) reads, e.g.::

    {"step": 10, "generations": 320, "eval/reward": 0.41, "eval/pass_rate": 0.2, ...}

>>> import tempfile, os, json
>>> d = tempfile.mkdtemp()
>>> with MetricsLogger(os.path.join(d, "metrics.jsonl")) as log:
...     log.write({"step": 1, "generations": 32, "train/reward": 0.5})
>>> json.loads(open(os.path.join(d, "metrics.jsonl")).read())["train/reward"]
0.5

On resume the trainer truncates the file back to the byte offset saved with the checkpoint
(:func:`truncate_to`), so a run killed mid-way and resumed has each step's line exactly once.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Any


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None  # JSON has no NaN/inf; a missing value reads as null
    return v


class MetricsLogger:
    """Append metric records to a JSONL file (flushed per line); TensorBoard when asked and installed."""

    def __init__(self, path: str | os.PathLike, *, tensorboard_dir: str | os.PathLike | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a", encoding="utf-8")
        self._tb = None
        if tensorboard_dir is not None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is an optional extra
                warnings.warn("tensorboard is not installed (pip install tensorboard); logging JSONL only",
                              stacklevel=2)
            else:
                self._tb = SummaryWriter(str(tensorboard_dir))

    def write(self, record: dict[str, Any]) -> None:
        """Write one record; numbers go to TensorBoard against ``generations``."""
        rec = {k: _clean(v) for k, v in record.items()}
        self._f.write(json.dumps(rec, sort_keys=False) + "\n")
        self._f.flush()
        if self._tb is not None:
            x = int(rec.get("generations", rec.get("step", 0)) or 0)
            for k, v in rec.items():
                if k not in ("step", "generations") and isinstance(v, (int, float)) and not isinstance(v, bool):
                    self._tb.add_scalar(k, v, x)

    def tell(self) -> int:
        """Byte offset of the end of what was written (saved with checkpoints)."""
        self._f.flush()
        return self._f.tell()

    def close(self) -> None:
        self._f.close()
        if self._tb is not None:
            self._tb.close()

    def __enter__(self) -> MetricsLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def truncate_to(path: str | os.PathLike, offset: int) -> None:
    """Cut ``path`` back to ``offset`` bytes (no-op when it is missing or already shorter)."""
    p = Path(path)
    if p.exists() and p.stat().st_size > offset:
        with open(p, "rb+") as f:
            f.truncate(offset)


def file_size(path: str | os.PathLike) -> int:
    p = Path(path)
    return p.stat().st_size if p.exists() else 0


def read_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
    """All records of a metrics file (unreadable lines skipped)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
    return out
