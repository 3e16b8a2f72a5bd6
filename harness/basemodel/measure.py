"""Measuring a base: its mean reward on held-out tasks without context and with a good reference."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from harness.basemodel.config import BaseModelConfig, as_config, make_env
from harness.basemodel.references import good_reference, referenced_prompts
from harness.config import NonNegFloat, NonNegInt, PosInt, Probability, check_fields


@dataclass
class EvalConfig:
    """How the base is measured."""

    n_tasks: NonNegInt = 120
    """Eval tasks (the first n of the eval split; 0 or more than exist: all)."""
    samples: PosInt = 1
    """Episodes per task and condition."""
    temperature: NonNegFloat = 0.7
    """Sampling temperature; the defaults here are the learners' rollout sampling (TrainConfig.sampling),
    so the numbers are the policy as RL samples it."""
    top_p: Probability = 0.95
    """Nucleus sampling mass."""
    top_k: int = 20
    """Top-k cut (-1: off, as in SamplingParams)."""
    max_new_tokens: PosInt = 96
    """Tokens per assistant turn."""
    max_turns: PosInt = 8
    """Assistant turns per episode (every procedure ends within 6)."""
    batch_size: PosInt = 64
    """Episodes played together through the engine."""
    seed: int = 0
    """Sampling and reference-choice seed."""
    threads: NonNegInt = 1
    """torch intra-op threads while rolling out (0: leave torch's setting); see PretrainConfig.threads."""
    progress: bool = True
    """Show a tqdm bar."""

    def __post_init__(self) -> None:
        check_fields(self)  # lopd pretrain builds one from its flags



def evaluate_base(model: Any, tokenizer: Any, cfg: BaseModelConfig | dict[str, Any] | None = None,
                  ecfg: EvalConfig | None = None) -> dict[str, Any]:
    """Mean reward on held-out eval tasks by real rollouts (HFEngine + harness.rollout), without
    context and with a good reference in the privileged-context framing. Per-domain means too."""
    cfg, ecfg = as_config(cfg), ecfg or EvalConfig()
    env0 = make_env(cfg, split=None)
    tasks = [t for t in env0.all_tasks() if t.split == "eval"]
    if 0 < ecfg.n_tasks < len(tasks):
        tasks = tasks[: ecfg.n_tasks]
    refs = {t.task_id: good_reference(env0, t.task_id, ecfg.seed, cfg.reference_result_chars)[1] for t in tasks}
    rewards, per_domain, turns, seconds = _play_eval(model, tokenizer, cfg, ecfg, tasks, refs)

    def mean(xs: list[float]) -> float:
        return round(sum(xs) / len(xs), 4) if xs else float("nan")

    return {
        "no_context": mean(rewards["no_context"]), "with_reference": mean(rewards["with_reference"]),
        "full_pass": {c: mean([float(r >= 1.0) for r in rs]) for c, rs in rewards.items()},
        "per_domain": {c: {d: mean(v) for d, v in sorted(ds.items())} for c, ds in per_domain.items()},
        "mean_turns": {c: mean([float(x) for x in v]) for c, v in turns.items()},
        "episodes": {c: len(v) for c, v in rewards.items()}, "tasks": len(tasks),
        "temperature": ecfg.temperature, "top_p": ecfg.top_p, "top_k": ecfg.top_k, "seconds": seconds,
    }



def _play_eval(model: Any, tokenizer: Any, cfg: BaseModelConfig, ecfg: EvalConfig, tasks: list[Any],
               refs: dict[str, str]) -> tuple[dict, dict, dict, float]:
    """Each task ``ecfg.samples`` times per condition (``no_context``, then ``with_reference``: its
    text reference framed in). Returns per condition the rewards, the rewards per domain and the
    turns of every episode, and the seconds the rollouts took."""
    import torch

    from harness.engines import HFEngine, SamplingParams
    from harness.rollout import RolloutConfig, rollout

    engine = HFEngine(model, tokenizer)
    rcfg = RolloutConfig(max_turns=ecfg.max_turns)
    domain = {t.task_id: t.data["scenario"]["micro"]["domain"] for t in tasks}
    ids = [t.task_id for t in tasks for _ in range(ecfg.samples)]
    rewards: dict[str, list[float]] = {"no_context": [], "with_reference": []}
    per_domain: dict[str, dict[str, list[float]]] = {c: {} for c in rewards}
    turns: dict[str, list[int]] = {c: [] for c in rewards}
    envs = [make_env(cfg, split=None, max_steps=ecfg.max_turns) for _ in range(min(ecfg.batch_size, len(ids)))]
    bar = None
    if ecfg.progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=2 * len(ids), desc="eval base", unit="ep", dynamic_ncols=True)
    t0 = time.perf_counter()
    old_threads = torch.get_num_threads()
    if ecfg.threads > 0:
        torch.set_num_threads(ecfg.threads)
    try:
        for cond in rewards:
            for start in range(0, len(ids), ecfg.batch_size):
                chunk = ids[start:start + ecfg.batch_size]
                sampling = SamplingParams(temperature=ecfg.temperature, top_p=ecfg.top_p, top_k=ecfg.top_k,
                                          max_new_tokens=ecfg.max_new_tokens,
                                          seed=ecfg.seed * 7919 + start)
                trajs = rollout(envs[: len(chunk)], engine, tokenizer, sampling=sampling, config=rcfg,
                                options=[{"task_id": tid} for tid in chunk],
                                build_prompt=referenced_prompts(tokenizer, chunk, refs) if cond == "with_reference" else None)
                for tid, tr in zip(chunk, trajs):
                    r = float(tr.episode.reward)
                    rewards[cond].append(r)
                    per_domain[cond].setdefault(domain[tid], []).append(r)
                    turns[cond].append(len(tr.episode.steps))
                if bar is not None:
                    bar.update(len(chunk))
    finally:
        torch.set_num_threads(old_threads)
        if bar is not None:
            bar.close()
    return rewards, per_domain, turns, round(time.perf_counter() - t0, 2)
