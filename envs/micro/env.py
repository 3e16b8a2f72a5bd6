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
from dataclasses import replace
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
        n_val: validation tasks: eval-split tasks ``n_eval .. n_eval + n_val - 1`` of the same world, with
            split "val". They share the held-out vocabulary and the domain mix of the eval (test) tasks, and
            the eval tasks stay the first ``n_eval``, so a tuning sweep reads "val" and reports "eval".
        split: "train", "val", "eval" or None (all). Other keyword arguments go to :class:`EnvScalerEnv`.
    """

    def __init__(
        self,
        seed: int = 0,
        n_train: int = DEFAULT_N_TRAIN,
        n_eval: int = DEFAULT_N_EVAL,
        *,
        n_val: int = 0,
        cache_dir: str | os.PathLike | None = None,
        prompt: str = "full",
        **kwargs,
    ):
        if prompt not in PROMPTS:
            raise ValueError(f"prompt must be one of {PROMPTS}, got {prompt!r}")
        if not isinstance(n_val, int) or isinstance(n_val, bool) or n_val < 0:
            raise ValueError(f"n_val must be an int >= 0, got {n_val!r}")
        super().__init__(None, None, **kwargs)
        self.world_seed, self.n_train, self.n_eval, self.cache_dir = seed, n_train, n_eval, cache_dir
        self.n_val, self.prompt = n_val, prompt

    def _paths(self) -> tuple[PathsArg, PathsArg]:
        files = cached_world(self.world_seed, self.n_train, self.n_eval + self.n_val, self.cache_dir)
        return files.envs, files.scenarios

    def load_tasks(self) -> list[Task]:
        tasks, n_eval = super().load_tasks(), 0
        for i, t in enumerate(tasks):  # the world lists each split's tasks in index order
            if t.split == "eval":
                if n_eval >= self.n_eval:
                    tasks[i] = replace(t, split="val")
                n_eval += 1
        return tasks

    def system_prompt(self, task: Task) -> str:
        if self.prompt == "full":
            return super().system_prompt(task)
        record = self.env_records[str(task.data["scenario"]["env_id"])]
        return compact_system_prompt(str(record.get("environment_summary") or ""), self.tools.schemas)
