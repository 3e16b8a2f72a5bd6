"""Writing episodes as a ``datasets`` dataset or OpenAI JSONL, and reading rows back as episodes.

Sources: a folder ``save_to_disk`` wrote (a Dataset, or a DatasetDict: every split in order), a parquet file,
or a JSONL file of rows. JSONL is read line by line with the stdlib, not through ``datasets``: Arrow would
merge the tools' free-form JSON schemas into one struct and hand back keys no schema had.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from envs.trace import Episode, TraceError
from envs.trace_rows import COLUMNS, episode_to_row, row_to_episode

OnError = Literal["raise", "skip"]


MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")


def features(extra_message_keys: Iterable[str] = ()) -> Any:
    """The exported columns' types: free-form objects (tool schemas, meta, steps) as ``Json``; message keys
    beyond the OpenAI ones (``extra_message_keys``) as ``Json`` fields, so Arrow does not drop them."""
    from datasets import Features, Json, List, Value

    call = {"id": Value("string"), "type": Value("string"),
            "function": {"name": Value("string"), "arguments": Value("string")}}
    message = {"role": Value("string"), "content": Value("string"), "name": Value("string"),
               "tool_calls": List(call), "tool_call_id": Value("string"),
               **{k: Json() for k in sorted(set(extra_message_keys) - set(MESSAGE_KEYS))}}
    return Features({
        "messages": List(message), "tools": List(Json()), "reward": Value("float64"), "env_id": Value("string"),
        "task_id": Value("string"), "split": Value("string"), "seed": Value("int64"),
        "terminated": Value("bool"), "truncated": Value("bool"), "n_steps": Value("int64"),
        "n_tool_calls": Value("int64"), "meta": Json(), "timings": Json(), "prompt_token_ids": List(Value("int64")),
        "steps": List(Json()), "trace_version": Value("int64"),
    })


def write_hf(episodes: Iterable[Episode], out: str | os.PathLike) -> int:
    """``save_to_disk`` the episodes into folder ``out``; returns how many rows were written."""
    from datasets import Dataset

    rows = [episode_to_row(ep) for ep in episodes]
    extra = {k for r in rows for m in r["messages"] for k in m}
    Dataset.from_list(rows, features=features(extra)).save_to_disk(str(out))
    return len(rows)


def write_openai_jsonl(episodes: Iterable[Episode], out: str | os.PathLike) -> int:
    """One row a line into file ``out`` (``datasets.load_dataset("json", ...)`` reads it)."""
    n = 0
    with open(out, "w", encoding="utf-8") as f:
        for ep in episodes:
            row = episode_to_row(ep)
            row["messages"] = [{k: v for k, v in m.items() if v is not None} for m in row["messages"]]
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def is_rows_source(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds dataset rows rather than our trace JSONL (whose records carry ``version``)."""
    p = Path(path)
    if p.is_dir():
        return any((p / f).is_file() for f in ("dataset_info.json", "state.json", "dataset_dict.json"))
    if p.suffix == ".parquet":
        return True
    if not p.is_file():
        return False
    with open(p, "rb") as f:
        first = next((line for line in f if line.strip()), b"")
    try:
        d = json.loads(first)
    except ValueError:
        return False  # the trace reader reports the bad line
    return isinstance(d, dict) and "version" not in d


def _arrow_rows(path: Path) -> tuple[list[str], Iterator[dict[str, Any]]]:
    """(columns, rows) of a saved folder or a parquet file, through ``datasets`` (which decodes ``Json``)."""
    import datasets

    if path.is_dir():
        ds = datasets.load_from_disk(str(path))
        parts = list(ds.items()) if isinstance(ds, datasets.DatasetDict) else [(None, ds)]
    else:
        import pyarrow.parquet as pq

        parts = [(None, datasets.Dataset(datasets.table.InMemoryTable(pq.read_table(path))))]
    columns = sorted(set().union(*(p.column_names for _, p in parts))) if parts else []
    return columns, ({"split": split, **row} if split else row for split, p in parts for row in p)


def _jsonl_rows(path: Path, on_error: OnError, errors: list[TraceError] | None) -> Iterator[tuple[int, Any]]:
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                yield lineno, json.loads(raw.decode("utf-8"))
            except ValueError as e:
                _fail(TraceError(path, lineno, f"{type(e).__name__}: {e}"[:500]), on_error, errors)


def _fail(err: TraceError, on_error: OnError, errors: list[TraceError] | None) -> None:
    if on_error == "raise":
        raise err
    if errors is not None:
        errors.append(err)


def _need(path: Path, columns: Iterable[str], required: tuple[str, ...]) -> None:
    missing = [c for c in required if c not in set(columns)]
    if missing:
        raise ValueError(f"{path}: the dataset has no {' or '.join(repr(c) for c in missing)} column "
                         f"(it has {', '.join(sorted(columns)) or 'none'}); its rows need {', '.join(required)}")


def iter_episodes(path: str | os.PathLike, *, required: tuple[str, ...] = ("messages",),
                  on_error: OnError = "raise", errors: list[TraceError] | None = None
                  ) -> Iterator[tuple[int, Episode]]:
    """(row number from 1, or JSONL line number; episode) of each row of ``path``.

    A source without a ``required`` column is a ValueError naming it (checked on the first JSONL row, as a
    JSONL file has no schema). A row that is no episode is a :class:`TraceError` (file and row/line),
    raised or, with ``on_error="skip"``, appended to ``errors``.
    """
    p = Path(path)
    if p.is_dir() or p.suffix == ".parquet":
        columns, rows = _arrow_rows(p)
        _need(p, columns, required)
        numbered: Iterator[tuple[int, Any]] = enumerate(rows, 1)
    else:
        numbered = _jsonl_rows(p, on_error, errors)
    first = True
    for n, row in numbered:
        if first and isinstance(row, dict) and not p.is_dir() and p.suffix != ".parquet":
            _need(p, row, required)
        first = False
        try:
            if not isinstance(row, dict):
                raise ValueError(f"a row must be an object, got {type(row).__name__}")
            if any(c not in row for c in required):  # a JSONL row after the first, which was checked
                raise ValueError(f"the row has no {' or '.join(repr(c) for c in required if c not in row)}")
            yield n, row_to_episode(row, env_id=p.stem, task_id=str(n))
        except (ValueError, TypeError, AttributeError) as e:
            _fail(TraceError(p, n, f"bad row: {type(e).__name__}: {e}"[:500]), on_error, errors)


def read_episodes(path: str | os.PathLike, **kw: Any) -> Iterator[Episode]:
    """The episodes of :func:`iter_episodes`, without their numbers."""
    for _, ep in iter_episodes(path, **kw):
        yield ep


__all__ = ["COLUMNS", "features", "is_rows_source", "iter_episodes", "read_episodes", "write_hf",
           "write_openai_jsonl"]
