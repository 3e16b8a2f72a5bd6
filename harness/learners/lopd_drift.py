"""The latent teacher's drift: how far it has moved from the cold-start teacher, on a fixed probe of prompts.

Each probe prompt is a training task's first prompt, framed with the latents of its retrieved experiences
as the teacher sees it. The drift is the mean over the probe of KL(teacher_phi || teacher_phi0) of the
next-token distribution at the prompt's end (the first token of the answer), over the whole vocabulary;
teacher_phi0 is the same frozen teacher fed the anchor latents c_phi0. It is 0 at the cold start and
grows as the composer moves what the teacher would say. The LOPD learner logs it every step as
``composer/drift_kl`` when ``lopd.drift_probe`` is set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from harness.learners.common import pad_id, pad_rows
from harness.learners.latent_teacher import latent_teacher_logits, latent_teacher_prompt


@dataclass
class DriftProbe:
    """The fixed probe: teacher prompts with latent slots, and what the composer encodes for each."""

    task_ids: list[str]
    prompts: list[str]
    """Each task's text (the composer's task prefix)."""
    experiences: list[list[str]]
    """Each task's retrieved experience texts."""
    rows: list[list[int]]
    """Teacher prompt ids with one placeholder per latent."""
    positions: list[list[int]]
    """The placeholders' positions in each row."""

    def state_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def build_probe(learner: Any, n: int) -> DriftProbe:
    """The first ``n`` training tasks (in the env's order) that retrieve an experience, as teacher prompts."""
    from envs.trace import Episode

    ctx = learner.ctx
    tasks = [t for t in ctx.tasks.values() if t.split == ctx.cfg.env.train_split]
    env = ctx.make_env()
    probe = DriftProbe([], [], [], [], [])
    try:
        for task, exps in zip(tasks, learner.retrieve(tasks)):
            if len(probe.rows) == n:
                break
            if not exps:
                continue
            _, info = env.reset(options={"task_id": task.task_id})
            ep = Episode(ctx.env_id, task.task_id, messages=list(info.get("messages") or []))
            got = latent_teacher_prompt(ctx.tokenizer, ep, len(exps) * learner.composer.n_latents,
                                        learner.cfg.framing, ctx.template_kwargs)
            if got is None:
                continue
            for part, value in zip((probe.task_ids, probe.prompts, probe.experiences, probe.rows, probe.positions),
                                   (task.task_id, task.prompt, exps, *got)):
                part.append(value)
    finally:
        env.close()
    return probe


@torch.no_grad()
def teacher_drift(composer: Any, probe: DriftProbe, tokenizer: Any, device: torch.device,
                  batch: int = 8) -> float:
    """Mean KL(teacher_phi || teacher_phi0) at the end of each probe prompt (see the module docstring)."""
    total = 0.0
    for i in range(0, len(probe.rows), batch):
        sl = slice(i, i + batch)
        rows, pos = probe.rows[sl], probe.positions[sl]
        ids, attn = pad_rows(rows, pad_id(tokenizer), device)
        at = torch.tensor([[len(r) - 1] for r in rows], device=device)
        logp = []
        for anchor in (False, True):
            lats = composer.encode(probe.prompts[sl], probe.experiences[sl], anchor=anchor)
            logits = latent_teacher_logits(composer, ids, attn, pos, lats, at)[:, 0]
            logp.append(torch.log_softmax(logits.double(), -1))
        total += float((logp[0].exp() * (logp[0] - logp[1])).sum())
    return total / max(len(probe.rows), 1)


def drift_metrics(learner: Any) -> dict[str, float]:
    """``{"composer/drift_kl": ...}`` on the learner's probe (built on first use, from ``lopd.drift_probe``
    training tasks, and kept in its checkpoints); {} when the probe is off."""
    n = learner.cfg.drift_probe
    if n <= 0:
        return {}
    if not learner.cfg.train_composer:
        return {"composer/drift_kl": 0.0}  # a frozen composer is its own anchor
    if learner.drift_probe is None:
        learner.drift_probe = build_probe(learner, n)
    return {"composer/drift_kl": teacher_drift(learner.composer, learner.drift_probe, learner.ctx.tokenizer,
                                               learner.ctx.device)}
