"""Where benchmark data lives: ``$LOPD_DATA_DIR``, or ``../shared/data`` beside the checkout.

Data is never committed to the project; loaders ask :func:`require_data` for their folder and get
a clear error naming the variable when it is absent.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DATA_ENV_VAR = "LOPD_DATA_DIR"
_DEV_DEFAULT = Path(__file__).resolve().parents[1].parent / "shared" / "data"


class DataNotFoundError(FileNotFoundError):
    """The benchmark data a loader needs is not where the data directory says."""


def data_dir() -> Path:
    """The benchmark data root: ``$LOPD_DATA_DIR`` if set, else the development default."""
    env = os.environ.get(DATA_ENV_VAR)
    return Path(env).expanduser() if env else _DEV_DEFAULT


def require_data(*parts: str) -> Path:
    """Path to a file or folder under the data root; raises DataNotFoundError when missing."""
    path = data_dir().joinpath(*parts)
    if not path.exists():
        raise DataNotFoundError(
            f"benchmark data not found at {path}. Set {DATA_ENV_VAR} to the folder that holds "
            f"{parts[0] if parts else 'the benchmark folders'}/ (see README.md, 'Data')."
        )
    return path


def has_data(*parts: str) -> bool:
    return data_dir().joinpath(*parts).exists()


def json_lines(path: str | os.PathLike) -> Iterator[tuple[int, Any, Exception | None]]:
    """``(line number, value, None)`` of each non-blank line of a JSONL file, or ``(line number, None, error)``
    where the line is not JSON (undecodable bytes are replaced, so every line is seen)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield n, json.loads(line), None
                except (ValueError, RecursionError) as e:  # RecursionError: nesting too deep to parse
                    yield n, None, e


def read_jsonl(path: str | os.PathLike) -> list[Any]:
    """Every value of a JSONL file; a line that is not JSON is an error naming it."""
    rows = []
    for n, value, error in json_lines(path):
        if error is not None:
            raise ValueError(f"{path}:{n}: not valid JSON ({error})") from None
        rows.append(value)
    return rows
