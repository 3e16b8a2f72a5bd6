"""``MicroEnv``: the micro world, run by the EnvScaler env unchanged (only where the records lie differs)::

import envs, gymnasium as gym
env = gym.make("lopd/micro-v0", split="eval")       # builds and caches the world on first use
prompt, info = env.reset(seed=0)

``prompt="compact"`` swaps the ~3.3K-character system prompt (the authors' text and the Qwen
``<tools>`` JSON block) for a few lines: the domain summary and one signature per tool. That is
what a tiny model trained on 2 CPU cores can afford; the episode rules are the same.
"""

from __future__ import annotations

import os
from typing import Any

from envs.core import Task
from envs.envscaler.env import EnvScalerEnv, PathsArg
from envs.micro.expert import FINAL_TEXT
from envs.micro.world import DEFAULT_N_EVAL, DEFAULT_N_TRAIN, cached_world

PROMPTS = ("full", "compact")


def compact_system_prompt(summary: str, tools: list[dict[str, Any]]) -> str:
    """The compact system prompt: the domain summary, one ``name(arg, ...)`` line per tool, the rules.

    >>> tool = {"type": "function", "function": {"name": "buy", "parameters": {"properties": {"item": {}}}}}
    >>> print(compact_system_prompt("A shop.", [tool]))
    A shop.
    Tools:
    buy(item)
    Call one tool per turn as <tool_call>{"name": ..., "arguments": {...}}</tool_call>. Reply Task Completed when done.
    """
    lines = [summary, "Tools:"] if summary else ["Tools:"]
    for t in tools:
        fn = t.get("function", t)
        args = ", ".join((fn.get("parameters") or {}).get("properties") or {})
        lines.append(f"{fn.get('name')}({args})")
    lines.append(
        'Call one tool per turn as <tool_call>{"name": ..., "arguments": {...}}</tool_call>. '
        f"Reply {FINAL_TEXT} when done."
    )
    return "\n".join(lines)


class MicroEnv(EnvScalerEnv):
    """EnvScaler semantics over the generated world ``(seed, n_train, n_eval)``.

    Args:
        seed: the world's seed.
        n_train, n_eval: tasks per split.
        cache_dir: where built worlds are kept (default ``$LOPD_CACHE_DIR`` or ``~/.cache/lopd``).
        prompt: "full" (the authors' system prompt and the Qwen tools block) or "compact"
            (:func:`compact_system_prompt`).
        split: "train", "eval" or None (both). Other keyword arguments go to :class:`EnvScalerEnv`.
    """

    def __init__(
        self,
        seed: int = 0,
        n_train: int = DEFAULT_N_TRAIN,
        n_eval: int = DEFAULT_N_EVAL,
        *,
        cache_dir: str | os.PathLike | None = None,
        prompt: str = "full",
        **kwargs,
    ):
        if prompt not in PROMPTS:
            raise ValueError(f"prompt must be one of {PROMPTS}, got {prompt!r}")
        super().__init__(None, None, **kwargs)
        self.world_seed, self.n_train, self.n_eval, self.cache_dir = seed, n_train, n_eval, cache_dir
        self.prompt = prompt

    def _paths(self) -> tuple[PathsArg, PathsArg]:
        files = cached_world(self.world_seed, self.n_train, self.n_eval, self.cache_dir)
        return files.envs, files.scenarios

    def system_prompt(self, task: Task) -> str:
        if self.prompt == "full":
            return super().system_prompt(task)
        record = self.env_records[str(task.data["scenario"]["env_id"])]
        return compact_system_prompt(str(record.get("environment_summary") or ""), self.tools.schemas)
