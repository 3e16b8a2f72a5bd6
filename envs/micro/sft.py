"""SFT material from the micro world: noisy-expert trajectories and referenced trajectories.

- :func:`render_experience`: a solved trajectory as experience text (task + action/result lines,
  long results cut), the form the experience bank stores.
- :func:`referenced_trajectory`: a successful reference from ANOTHER task of the same domain and
  template, framed in the first user message as privileged context, followed by a trajectory of
  the target task that uses the reference's procedure.
- :func:`sft_corpus`: a mix of plain noisy-expert trajectories and referenced ones, as message lists.

>>> env = MicroEnv(seed=0, n_train=60, n_eval=12, split="train")                   # doctest: +SKIP
>>> corpus = sft_corpus(env, n_plain=100, n_referenced=50, seed=0)                  # doctest: +SKIP
>>> corpus[0]["messages"][0]["role"], corpus[0]["kind"]                             # doctest: +SKIP
('system', 'plain')
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

from envs.envscaler.env import TASK_FINISHED, EnvScalerEnv
from envs.micro.expert import FINAL_TEXT, Trajectory, noisy_expert, run_solver

DEFAULT_REFERENCE_FRAMING = (
    "Reference experience: below is a trajectory from a different task that has already been solved "
    "successfully. Use it only as guidance; it is not the task you must solve now.\n"
    "{reference}\n\nYour task:\n{task}"
)
"""First user message of a referenced trajectory: ``{reference}`` takes the experience text, ``{task}`` the
task. Mirrors lopd.latent's framing, with the text in place of the latents."""


def render_experience(
    task: str, calls: Sequence[tuple[str, Mapping[str, Any], str]], *, max_result_chars: int = 240
) -> str:
    """Experience text: the task, then each action with its (shortened) result, exactly as the
    experience bank renders a solved episode (``lopd.bank.render``, ``observation_chars`` =
    ``max_result_chars``), so a base pretrained on these references can read the bank's.

    >>> print(render_experience("Buy a kite.", [("buy", {"item": "kite"}, "{'success': True}")]))
    Task: Buy a kite.
    <BLANKLINE>
    Trajectory:
    [1] Action: {"name": "buy", "arguments": {"item": "kite"}}
    [1] Result: {'success': True}
    [2] Response: Task Completed
    [2] Observation: Task finished
    """
    lines = [f"Task: {task}", "", "Trajectory:"]
    for i, (name, args, result) in enumerate(calls, 1):
        lines.append(f"[{i}] Action: {json.dumps({'name': name, 'arguments': dict(args)}, ensure_ascii=False)}")
        result = " ".join(result.split())  # the bank collapses whitespace runs, then cuts
        if len(result) > max_result_chars:
            result = f"{result[:max_result_chars].rstrip()} ...[+{len(result) - max_result_chars} chars]"
        lines.append(f"[{i}] Result: {result}")
    n = len(calls) + 1
    lines += [f"[{n}] Response: {FINAL_TEXT}", f"[{n}] Observation: {TASK_FINISHED}"]
    return "\n".join(lines)


def experience_of(traj: Trajectory, **kw: Any) -> str:
    return render_experience(traj.task, traj.calls, **kw)


def _same_procedure(env: EnvScalerEnv, task_id: str) -> list[str]:
    """Train tasks of the same domain and template as ``task_id``, other than it."""
    micro = env.task_by_id(task_id).data["scenario"]["micro"]
    out = []
    for t in env.all_tasks():
        m = t.data["scenario"].get("micro") or {}
        if (
            t.task_id != task_id
            and t.split == "train"
            and m.get("domain") == micro["domain"]
            and m.get("template") == micro["template"]
        ):
            out.append(t.task_id)
    return out


def referenced_trajectory(
    env: EnvScalerEnv,
    task_id: str,
    rng: random.Random,
    *,
    reference_task_id: str | None = None,
    framing: str = DEFAULT_REFERENCE_FRAMING,
    max_result_chars: int = 240,
) -> Trajectory:
    """A successful reference (another train task, same domain and template) framed into the first user
    message, then the correct procedure on ``task_id`` played through the env."""
    if "{reference}" not in framing or "{task}" not in framing:
        raise ValueError("framing must contain '{reference}' and '{task}'")
    if reference_task_id is None:
        pool = _same_procedure(env, task_id)
        if not pool:
            raise ValueError(f"no other train task shares the procedure of {task_id}")
        reference_task_id = rng.choice(pool)
    elif reference_task_id == task_id:
        raise ValueError("the reference must come from another task")
    ref = run_solver(env, reference_task_id)
    if ref.reward < 1.0:
        raise RuntimeError(f"the expert failed the reference task {reference_task_id} (reward {ref.reward})")
    traj = run_solver(env, task_id)
    traj.reference_task_id = reference_task_id
    traj.messages = copy.deepcopy(traj.messages)
    user = traj.messages[1]
    user["content"] = framing.format(
        reference=experience_of(ref, max_result_chars=max_result_chars), task=user["content"]
    )
    return traj


def sft_corpus(
    env: EnvScalerEnv,
    n_plain: int,
    n_referenced: int,
    seed: int = 0,
    *,
    success: Mapping[str, float] | None = None,
    framing: str = DEFAULT_REFERENCE_FRAMING,
    split: str = "train",
) -> list[dict[str, Any]]:
    """Plain noisy-expert trajectories and referenced trajectories over ``split`` tasks, shuffled.

    Each item: {kind: "plain" | "referenced", task_id, domain, template, reward, mistake,
    reference_task_id, messages}. Deterministic in ``seed``.
    """
    rng = random.Random(f"micro-sft:{seed}")
    tasks = [t.task_id for t in env.all_tasks() if t.split == split]
    if not tasks:
        raise ValueError(f"no {split} tasks in this env")
    items = []
    for i in range(n_plain + n_referenced):
        tid = tasks[rng.randrange(len(tasks))]
        if i < n_plain:
            traj, kind = noisy_expert(env, tid, rng, success), "plain"
        else:
            traj, kind = referenced_trajectory(env, tid, rng, framing=framing), "referenced"
        items.append(
            {
                "kind": kind,
                "task_id": traj.task_id,
                "domain": traj.domain,
                "template": traj.template,
                "reward": traj.reward,
                "mistake": traj.mistake,
                "reference_task_id": traj.reference_task_id,
                "messages": traj.messages,
            }
        )
    rng.shuffle(items)
    return items
