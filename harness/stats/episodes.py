"""Tool-call behaviour statistics from traces (the paper's Table 3, extended).

Each metric is computed per episode, then summarised per group (mean, std, median, n).
Exact definitions are in docs/STATS.md; :func:`episode_stats` is their single implementation.

>>> from envs.trace import Episode, Step, CallRecord
>>> ep = Episode("env", "t", steps=[Step(0, "x", calls=[CallRecord("f", {"a": 1}), CallRecord("f", {"a": 1})])],
...              reward=1.0).__dict__
>>> s = episode_stats({**ep, "steps": [vars(st) | {"calls": [vars(c) for c in st.calls]} for st in ep["steps"]]})
>>> s["calls_per_step"], s["repeated_calls"], s["reward_per_call"]
(2.0, 1, 0.5)

Reading is streaming: episodes are reduced to a few numbers as they are read and never held,
so memory grows with the number of episodes times the number of metrics (8 bytes each), never
with trace size. Large inputs are read by several processes (:mod:`harness.stats.parallel`); :mod:`harness.stats.collect` reads
files and :mod:`harness.stats.tables` lays the groups out.
"""

from __future__ import annotations

import json
import math
import os
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

from envs.trace import TraceError

METRICS = (
    "env_steps", "calls_per_step", "first_response_tokens", "repeated_calls", "reward",
    "reward_per_call", "parse_error_rate", "tool_error_rate", "turns_to_first_success", "success",
)
GroupBy = Literal["env", "learner", "run", "category"]


def _call_key(call: dict[str, Any]) -> str | None:
    if call.get("name") is None or call.get("parse_error") is not None:
        return None
    try:
        return call["name"] + "\0" + json.dumps(call.get("arguments"), sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return call["name"] + "\0" + repr(call.get("arguments"))


def episode_stats(ep: dict[str, Any], success_threshold: float = 1.0) -> dict[str, Any]:
    """The per-episode metrics of one trace record (a dict as stored in JSONL)."""
    steps = ep.get("steps") or []
    n_steps = len(steps)
    n_calls = n_parse_steps = n_executed = n_tool_errors = repeats = 0
    seen: set[str] = set()
    by_tool: Counter[str] = Counter()
    first_success = None
    for i, s in enumerate(steps):
        calls = s.get("calls") or []
        n_calls += len(calls)
        if s.get("parse_error") is not None or any(c.get("parse_error") is not None for c in calls):
            n_parse_steps += 1
        for c in calls:
            if c.get("name") is not None:
                by_tool[c["name"]] += 1
            if c.get("executed"):
                n_executed += 1
                n_tool_errors += c.get("error") is not None
            key = _call_key(c)
            if key is not None:
                repeats += key in seen
                seen.add(key)
        if first_success is None and (s.get("reward") or 0.0) >= success_threshold:
            first_success = i + 1
    reward = float(ep.get("reward") or 0.0)
    if first_success is None and reward >= success_threshold and n_steps:
        first_success = n_steps  # outcome reward arrives with the last step
    first_tokens = steps[0].get("token_ids") if steps else None
    return {
        "env_steps": n_steps,
        "calls_per_step": n_calls / n_steps if n_steps else None,
        "first_response_tokens": len(first_tokens) if first_tokens is not None else None,
        "repeated_calls": repeats,
        "reward": reward,
        "reward_per_call": reward / n_calls if n_calls else None,
        "parse_error_rate": n_parse_steps / n_steps if n_steps else None,
        "tool_error_rate": n_tool_errors / n_executed if n_executed else None,
        "turns_to_first_success": first_success,
        "success": float(reward >= success_threshold),
        "calls_by_tool": by_tool,
    }


@dataclass
class Summary:
    """One metric over a group: mean, standard deviation, median, and how many episodes had it."""

    mean: float
    std: float
    median: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        if not values:
            return cls(math.nan, math.nan, math.nan, 0)
        n = len(values)
        mean = math.fsum(values) / n
        std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
        s = sorted(values)
        median = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
        return cls(mean, std, median, n)


@dataclass
class GroupStats:
    """Per-episode metric values of one group (compact float arrays), plus its tool-call distribution."""

    episodes: int = 0
    values: dict[str, array] = field(default_factory=lambda: defaultdict(partial(array, "d")))
    calls_by_tool: Counter[str] = field(default_factory=Counter)

    def add(self, stats: dict[str, Any]) -> None:
        self.episodes += 1
        for m in METRICS:
            if stats[m] is not None:
                self.values[m].append(float(stats[m]))
        self.calls_by_tool.update(stats["calls_by_tool"])

    def merge(self, other: GroupStats) -> None:
        """Append ``other``'s episodes, as if they had been added after this group's."""
        self.episodes += other.episodes
        for m, v in other.values.items():
            self.values[m].extend(v)
        self.calls_by_tool.update(other.calls_by_tool)

    def summary(self) -> dict[str, Summary]:
        return {m: Summary.of(self.values.get(m, [])) for m in METRICS}


def group_key(ep: dict[str, Any], by: GroupBy, path: str | os.PathLike) -> str:
    """The group of one record; ``--by run`` without ``meta.run`` names it after its file.

    >>> group_key({}, "run", "runs/base/traces.jsonl"), group_key({}, "run", "runs/base.jsonl")
    ('base', 'base')
    """
    meta = ep.get("meta") or {}
    if not isinstance(meta, dict):
        raise TypeError(f"meta must be an object, got {type(meta).__name__}")
    if by == "env":
        return str(ep.get("env_id"))
    if by == "category":
        return str(meta.get("category", ep.get("env_id")))
    if by == "learner":
        return str(meta.get("learner", "-"))
    if "run" in meta:
        return str(meta["run"])
    path = Path(path)
    # every run directory holds a traces.jsonl: its folder, not "traces", tells runs apart
    if path.stem == "traces" and path.parent.name:
        return path.parent.name
    return path.stem


def add_records(groups: dict[str, GroupStats], path: Path, records: Iterator[tuple[int, dict[str, Any]]],
                by: GroupBy, *, skip_bad: bool, errors: list[TraceError] | None, success_threshold: float) -> None:
    """Add each (line number, record) of ``path`` to its group in ``groups`` (the loop of :func:`collect`)."""
    for lineno, ep in records:
        try:
            stats = episode_stats(ep, success_threshold)
            key = group_key(ep, by, path)
        except (TypeError, AttributeError, ValueError) as e:  # a record of the right version but wrong shape
            err = TraceError(path, lineno, f"malformed episode: {type(e).__name__}: {e}")
            if not skip_bad:
                raise err from None
            if errors is not None:
                errors.append(err)
            continue
        groups.setdefault(key, GroupStats()).add(stats)
