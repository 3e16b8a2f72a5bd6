"""Versioned episode traces as JSONL: one :class:`Episode` per line.

Traces are what environments produce and what the experience bank, the statistics and the
learners read, so they live at the bottom of the import graph (stdlib only).

Write while rolling out, read back lazily::

    with TraceWriter("runs/x/traces.jsonl") as w:   # appends; never rewrites earlier lines
        w.write(episode)
    for ep in read_traces("runs/x/traces.jsonl"):
        ...

A reader refuses a corrupt or unknown-version line with :class:`TraceError` naming the file and
line; ``read_traces(path, on_error="skip")`` reports the bad lines and keeps the good ones.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

TRACE_VERSION = 1


class TraceError(ValueError):
    """A trace line that cannot be read. ``path`` and ``line`` say where."""

    def __init__(self, path: str | os.PathLike, line: int, reason: str):
        self.path, self.line, self.reason = str(path), line, reason
        super().__init__(f"{path}:{line}: {reason}")


@dataclass
class CallRecord:
    """One tool call as parsed from an assistant turn."""

    name: str | None
    """Tool name, or None when the call did not parse."""
    arguments: dict[str, Any] | None
    """Parsed arguments, or None when they did not parse."""
    parse_error: str | None = None
    """Why the call did not parse, if it did not."""
    executed: bool = False
    """Whether the env executed it (EnvScaler runs only the first call of a response)."""
    result: str | None = None
    """The text the tool returned (or the error text shown to the model)."""
    error: str | None = None
    """Execution error: unknown tool, bad arguments, or the exception the tool raised."""


@dataclass
class Step:
    """One assistant turn and the environment's answer to it."""

    index: int
    """0-based position in the episode."""
    text: str
    """The raw sampled text of the assistant turn."""
    token_ids: list[int] | None = None
    """The sampled token ids exactly as generated (token-in/token-out); None outside a rollout."""
    logprobs: list[float] | None = None
    """Sampling log-prob of each sampled token."""
    calls: list[CallRecord] = field(default_factory=list)
    """Every <tool_call> block of the response, executed or not, in order."""
    parse_error: str | None = None
    """A response-level parse defect (e.g. an unclosed tag)."""
    observation: str = ""
    """The text the env returned as the next observation."""
    observation_token_ids: list[int] | None = None
    """Tokens of the rendered observation appended after this turn (token-in/token-out)."""
    reward: float = 0.0
    """Reward given for this step."""
    terminated: bool = False
    truncated: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds spent, e.g. {"generate": 0.8, "env": 0.01}. Filled by the harness."""

    @property
    def n_parse_errors(self) -> int:
        return int(self.parse_error is not None) + sum(c.parse_error is not None for c in self.calls)

    @property
    def n_tool_errors(self) -> int:
        return sum(c.error is not None for c in self.calls)


@dataclass
class Episode:
    """A whole episode: the task, the conversation, every step and the outcome."""

    env_id: str
    task_id: str
    split: str = "train"
    """'train' or 'eval' (or a benchmark's own split name). The bank ingests only 'train'."""
    seed: int | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The full conversation as chat messages (system, user, assistant, tool)."""
    tools: list[dict[str, Any]] = field(default_factory=list)
    """OpenAI-style tool schemas offered to the model."""
    prompt_token_ids: list[int] | None = None
    """Tokens of the rendered prompt before the first assistant turn."""
    steps: list[Step] = field(default_factory=list)
    reward: float = 0.0
    """Final (verifier) reward."""
    terminated: bool = False
    truncated: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    """Free-form context: run, learner, generation index, category, verdict details."""
    version: int = TRACE_VERSION

    def to_json(self) -> str:
        text = json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (model output can hold one): escape it, it reads back alike
            text = json.dumps(asdict(self), ensure_ascii=True, separators=(",", ":"))
        return text

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Episode:
        if not isinstance(d, dict):
            raise ValueError(f"expected a JSON object, got {type(d).__name__}")
        version = d.get("version")
        if version != TRACE_VERSION:
            raise ValueError(f"unknown trace version {version!r} (this reader knows {TRACE_VERSION})")
        d = dict(d)
        steps = d.pop("steps", [])
        ep = cls(**_checked(cls, d))
        ep.steps = []
        for s in steps:
            s = dict(_require_obj(s, "step"))
            calls = [CallRecord(**_checked(CallRecord, _require_obj(c, "call"))) for c in s.pop("calls", [])]
            ep.steps.append(Step(**_checked(Step, s), calls=calls))
        return ep

    @classmethod
    def from_json(cls, line: str) -> Episode:
        return cls.from_dict(json.loads(line))

    @property
    def n_tool_calls(self) -> int:
        return sum(len(s.calls) for s in self.steps)


def _require_obj(x: Any, what: str) -> dict[str, Any]:
    if not isinstance(x, dict):
        raise ValueError(f"{what} must be a JSON object, got {type(x).__name__}")
    return x


def _checked(cls: type, d: dict[str, Any]) -> dict[str, Any]:
    known = {f.name for f in fields(cls)}
    extra = set(d) - known
    if extra:
        raise ValueError(f"unknown {cls.__name__} field(s): {sorted(extra)}")
    required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
    missing = required - set(d) - {"calls", "steps"}
    if missing:
        raise ValueError(f"missing {cls.__name__} field(s): {sorted(missing)}")
    return d


class TraceWriter:
    """Append episodes to a JSONL file, one flushed line each, so a crash loses at most one line."""

    def __init__(self, path: str | os.PathLike, *, fsync: bool = False):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self._repair_partial_tail()
        self._f = open(self.path, "a", encoding="utf-8")

    def _repair_partial_tail(self) -> None:
        # A killed writer can leave a line without its newline; terminate it so the next
        # episode starts on a line of its own (the reader reports the torn line).
        if self.path.exists() and self.path.stat().st_size > 0:
            with open(self.path, "rb+") as f:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")

    def write(self, episode: Episode) -> None:
        self._f.write(episode.to_json() + "\n")
        self._f.flush()
        if self._fsync:
            os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_traces(path: str | os.PathLike, episodes: Iterable[Episode]) -> int:
    """Append episodes to ``path``; returns how many were written."""
    n = 0
    with TraceWriter(path) as w:
        for ep in episodes:
            w.write(ep)
            n += 1
    return n


def iter_records(
    path: str | os.PathLike,
    on_error: Literal["raise", "skip", "warn"] = "raise",
    errors: list[TraceError] | None = None,
    *,
    span: tuple[int, int] | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Stream (line number, raw dict) pairs of known-version records, without building dataclasses.

    The fast path for tools that only need a few fields (statistics over 100k episodes). Lines
    that are not JSON objects of this trace version are handled as in :func:`read_traces`.
    ``span=(start, end)`` reads only the lines that start at byte offsets in ``[start, end)``
    (``start`` must be a line start) and numbers them from 1 at ``start`` (for parallel readers,
    which add the lines before ``start`` themselves).
    """
    for lineno, item in _lines(path, on_error, errors, _parse_record, span):
        yield lineno, item


def read_traces(
    path: str | os.PathLike,
    on_error: Literal["raise", "skip", "warn"] = "raise",
    errors: list[TraceError] | None = None,
) -> Iterator[Episode]:
    """Stream episodes from a JSONL trace file.

    on_error: "raise" stops at the first bad line with a TraceError naming file and line;
    "warn" and "skip" keep reading (both append each TraceError to ``errors`` when given;
    "warn" also issues a warning). Blank lines are ignored.
    """
    for _, ep in _lines(path, on_error, errors, Episode.from_json):
        yield ep


def _parse_record(line: str) -> dict[str, Any]:
    d = json.loads(line)
    if not isinstance(d, dict):
        raise ValueError(f"expected a JSON object, got {type(d).__name__}")
    if d.get("version") != TRACE_VERSION:
        raise ValueError(f"unknown trace version {d.get('version')!r} (this reader knows {TRACE_VERSION})")
    return d


def _take(f: Any, n: int) -> Iterator[bytes]:
    """The lines of ``f`` that start within its next ``n`` bytes."""
    for raw in f:
        if n <= 0:
            return
        n -= len(raw)
        yield raw


def _lines(path: str | os.PathLike, on_error: str, errors: list[TraceError] | None,
           parse: Any, span: tuple[int, int] | None = None) -> Iterator[tuple[int, Any]]:
    with open(path, "rb") as f:
        if span is not None:
            f.seek(span[0])
        for lineno, raw in enumerate(f if span is None else _take(f, span[1] - span[0]), 1):
            if not raw.strip():
                continue
            try:
                yield lineno, parse(raw.decode("utf-8"))
            except (ValueError, TypeError, RecursionError) as e:
                err = TraceError(path, lineno, f"{type(e).__name__}: {e}"[:500])
                if on_error == "raise":
                    raise err from None
                if errors is not None:
                    errors.append(err)
                if on_error == "warn":
                    warnings.warn(str(err), stacklevel=3)
