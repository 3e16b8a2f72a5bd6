"""Scripted experts for the micro world, played through the real env.

``run_solver`` drives a domain's solver generator against an :class:`EnvScalerEnv` episode: each
yielded call is rendered as a Hermes ``<tool_call>`` (``render_tool_call``), stepped through the
env, and the parsed tool result is sent back, so every id the solver uses was read from an
observation of this episode. The episode ends with the authors' ``Task Completed``.

``noisy_expert`` follows the correct procedure with a per-domain probability and otherwise one of
the template's wrong procedures (skip a step, pick the wrong entity, use a distractor, stop early).

>>> env = MicroEnv(seed=0, n_train=12, n_eval=6)                 # doctest: +SKIP
>>> run_solver(env, "micro_shop-train-task_0").reward            # doctest: +SKIP
1.0
"""

from __future__ import annotations

import ast
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from envs.envscaler.env import EnvScalerEnv
from envs.micro.domains import DOMAINS
from envs.protocol import render_tool_call

FINAL_TEXT = "Task Completed"


@dataclass
class Trajectory:
    """One played episode as chat messages, with what produced it."""

    task_id: str
    domain: str
    template: str
    messages: list[dict[str, Any]]
    """system, user, then assistant turns with Hermes tool calls and the env's real replies."""
    reward: float
    mistake: str | None
    """None: the correct procedure was followed."""
    calls: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)
    """(tool, arguments, result text) for every executed call."""
    task: str = ""
    reference_task_id: str | None = None
    """For referenced trajectories: the task whose successful trajectory is the reference."""

    @property
    def followed_procedure(self) -> bool:
        return self.mistake is None


def parse_result(text: str) -> Any:
    """A tool result as the env shows it (``str(value)``) back to a Python value; text if it is not one."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def run_solver(env: EnvScalerEnv, task_id: str, mistake: str | None = None) -> Trajectory:
    """Play the domain's scripted solver (``mistake=None``: the correct procedure) on one task."""
    _, info = env.reset(options={"task_id": task_id})
    micro = env.task.data["scenario"].get("micro")
    if not micro:
        raise ValueError(f"{task_id} is not a micro-world scenario (no 'micro' field)")
    domain = DOMAINS[micro["domain"]]
    if mistake is not None and mistake not in domain.mistakes[micro["template"]]:
        raise ValueError(f"{domain.name}/{micro['template']} has no mistake {mistake!r}")
    messages = list(info["messages"])
    traj = Trajectory(task_id, domain.name, micro["template"], messages, 0.0, mistake, task=env.task.prompt)
    gen = domain.solve(micro["params"], mistake)
    call = next(gen, None)
    ended = False
    while call is not None:
        name, args = call
        _, _, term, trunc, step_info = env.step(render_tool_call(name, args))
        messages.extend(step_info["messages"])
        if term or trunc:
            ended = True
            break
        content = step_info["messages"][-1]["content"]
        traj.calls.append((name, args, content))
        try:
            call = gen.send(parse_result(content))
        except StopIteration:
            call = None
    gen.close()
    if not ended:
        _, _, _, _, step_info = env.step(FINAL_TEXT)
        messages.extend(step_info["messages"])
    traj.reward = env.final_reward
    return traj


def expert_success(overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """Per-domain probability of following the correct procedure (domain defaults, then overrides)."""
    probs = {name: d.expert_success for name, d in DOMAINS.items()}
    for name, p in (overrides or {}).items():
        if name not in probs:
            raise KeyError(f"no domain {name!r}; domains: {', '.join(probs)}")
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"success probability of {name} must be in [0, 1], got {p}")
        probs[name] = float(p)
    return probs


def choose_mistake(
    micro: Mapping[str, Any], rng: random.Random, success: Mapping[str, float] | None = None
) -> str | None:
    """None (the correct procedure) with the domain's probability, else a random wrong procedure."""
    p = expert_success(success)[micro["domain"]]
    return None if rng.random() < p else rng.choice(DOMAINS[micro["domain"]].mistakes[micro["template"]])


def noisy_expert(
    env: EnvScalerEnv, task_id: str, rng: random.Random, success: Mapping[str, float] | None = None
) -> Trajectory:
    """The correct procedure with the domain's probability, else a random wrong one of the template."""
    micro = env.task_by_id(task_id).data["scenario"]["micro"]
    return run_solver(env, task_id, choose_mistake(micro, rng, success))
