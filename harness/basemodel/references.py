"""References: a successful run of another task with the same procedure, framed into the first user message
(the text the latents stand in for)."""

from __future__ import annotations

import copy
import random
from typing import Any

from envs.micro.env import MicroEnv
from envs.micro.expert import run_solver
from envs.micro.sft import experience_of
from lopd.latent import frame_user_message


def reference_framing() -> str:
    """The text-reference framing: lopd.latent's framing with ``{reference}`` where the latents go.

    >>> f = reference_framing()
    >>> "{reference}" in f and "{task}" in f and f.startswith("Reference experience")
    True
    """
    return frame_user_message("{task}", sentinel="{reference}")



def frame_reference(task_text: str, reference: str) -> str:
    """The first user message with a text reference framed in (what the teachers' framing holds)."""
    return reference_framing().replace("{reference}", reference).replace("{task}", task_text)



def referenced_prompts(tokenizer: Any, task_ids: list[str], references: dict[str, str]):
    """A ``build_prompt`` for :func:`harness.rollout.rollout` over envs reset to ``task_ids`` in order:
    each task's reference framed into its first user message (a task without one plays without
    context). rollout builds each env's prompt once, in env order."""
    from harness.rollout import render_prompt

    queue = iter(task_ids)

    def build(messages: list[dict[str, Any]]) -> tuple[list[int], None]:
        msgs, ref = copy.deepcopy(messages), references.get(next(queue))
        if ref is not None:
            msgs[1]["content"] = frame_reference(str(msgs[1]["content"]), ref)
        return render_prompt(tokenizer, msgs), None

    return build



def good_reference(env: MicroEnv, task_id: str, seed: int = 0, max_result_chars: int = 120) -> tuple[str, str]:
    """(reference task id, experience text): the expert's successful run on another train task of the
    same domain and template, chosen deterministically from ``(seed, task_id)``."""
    micro = env.task_by_id(task_id).data["scenario"]["micro"]
    pool = [t.task_id for t in env.all_tasks()
            if t.split == "train" and t.task_id != task_id
            and t.data["scenario"]["micro"]["domain"] == micro["domain"]
            and t.data["scenario"]["micro"]["template"] == micro["template"]]
    if not pool:
        raise ValueError(f"no train task shares the procedure of {task_id}")
    ref_id = random.Random(f"reference:{seed}:{task_id}").choice(sorted(pool))
    traj = run_solver(env, ref_id)
    if traj.reward < 1.0:
        raise RuntimeError(f"the expert failed the reference task {ref_id} (reward {traj.reward})")
    return ref_id, experience_of(traj, max_result_chars=max_result_chars)
