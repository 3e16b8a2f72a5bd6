"""EnvScaler's summary metrics: mean reward, full-pass rate, mean steps.

An episode is an :class:`envs.trace.Episode`, or a mapping with ``reward`` and ``steps`` (a count
or a list of steps). Steps are assistant turns, the unit ``max_steps`` counts. A full pass is a
reward of 1.0: every check returned True.

>>> summarize([{"reward": 1.0, "steps": 3}, {"reward": 0.5, "steps": 5}])
{'n': 2, 'mean_reward': 0.75, 'full_pass_rate': 0.5, 'mean_steps': 4.0}
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any


def _reward_and_steps(ep: Any) -> tuple[float, int]:
    if isinstance(ep, Mapping):
        reward, steps = ep["reward"], ep["steps"]
    else:
        reward, steps = ep.reward, ep.steps
    n = steps if isinstance(steps, int) else len(steps)
    return float(reward), n


def summarize(episodes: Iterable[Any]) -> dict[str, float | int]:
    """n, mean_reward, full_pass_rate, mean_steps over the episodes (NaN means for none)."""
    pairs = [_reward_and_steps(e) for e in episodes]
    if not pairs:
        return {"n": 0, "mean_reward": math.nan, "full_pass_rate": math.nan, "mean_steps": math.nan}
    n = len(pairs)
    return {
        "n": n,
        "mean_reward": sum(r for r, _ in pairs) / n,
        "full_pass_rate": sum(r >= 1.0 for r, _ in pairs) / n,
        "mean_steps": sum(s for _, s in pairs) / n,
    }
