"""Shared helpers of the learner and trainer tests: expert shop traces and tiny trainers."""

from __future__ import annotations

import os
from pathlib import Path

from envs.trace import Episode, TraceWriter

SMALL = [
    "env.id=lopd/shop-v0", "rollouts_per_step=4", "sampling.max_new_tokens=12", "rollout.max_turns=2",
    "eval.at_start=false", "eval.every_generations=0", "eval.at_end=false", "log.progress=false",
    "optim.lr=1e-3", "bank.embedder=hashing", "lopd.composer.qformer.depth=2", "lopd.allow_self_retrieval=true",
    "sampling.temperature=1.0", "checkpoint.every_steps=0",
    "lopd.composer_init=random",  # no cold start in unit tests: the composer starts random
]
"""Overrides that make a run small enough for a unit test on a shared 2-core CPU."""

SUBPROCESS_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
"""Environment of trainer subprocesses (one thread each: much faster on a crowded CPU)."""


def write_shop_expert_traces(path: Path, seeds: int = 2) -> Path:
    """Scripted-expert episodes of both shop tasks (train 'apples', eval 'mix'), reward 1."""
    import gymnasium as gym

    import envs  # noqa: F401
    from envs.protocol import render_tool_call

    env = gym.make("lopd/shop-v0")
    with TraceWriter(path) as w:
        for tid in ("apples", "mix"):
            for seed in range(seeds):
                env.reset(seed=seed, options={"task_id": tid})
                u = env.unwrapped
                plan = [render_tool_call("add_to_cart", {"item": i, "qty": q}) for i, q in u.task.data["want"].items()]
                for action in ("\n".join(plan), render_tool_call("checkout", {}), "Done."):
                    _, _, term, trunc, _ = env.step(action)
                    if term or trunc:
                        break
                w.write(Episode(env_id="lopd/shop-v0", task_id=tid, split=u.task.split, seed=seed, messages=u.messages,
                                tools=u.tools.schemas, steps=u.steps, reward=u.final_reward, terminated=term,
                                truncated=trunc))
    return path


def small_overrides(run_dir: Path, learner: str, traces: Path | None = None, *extra: str) -> list[str]:
    out = [f"run_dir={run_dir}", f"learner={learner}", *SMALL]
    if traces is not None:
        out += [f"bank.traces=[{traces}]", f"sft.data=[{traces}]"]
    return out + list(extra)


def make_trainer(run_dir: Path, learner: str, traces: Path | None = None, *extra: str):
    from harness.config import load_config
    from harness.training.train_config import TrainConfig
    from harness.training.trainer import Trainer

    return Trainer(load_config(TrainConfig, None, small_overrides(run_dir, learner, traces, *extra)))
