"""SFT: next-token NLL on demonstrations, for warm starts and the micro world's base model.

Examples come from JSONL files, one per line: an ``envs.trace`` Episode (its exact token ids
when the rollout recorded them, else its messages rendered like a rollout) or ``{"messages":
[...]}``; or from the micro world's noisy-expert corpus (``sft.micro_plain``/``micro_referenced``,
generated from the configured env). Only assistant tokens are supervised; the loss is summed
over them and divided by the step's global count. The trainer samples examples like tasks
(seeded per-epoch order), ``rollouts_per_step`` per step, and counts each as one generation::

    lopd train harness/configs/sft.yaml sft.data=[runs/expert/traces.jsonl] generations=2000
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from envs.data import json_lines
from envs.trace import Episode
from harness.distributed import sum_floats
from harness.learners.base import Learner, LearnerContext, StepBatch
from harness.learners.common import Timer, conversation_tokens, pad_id, pad_rows
from harness.rollout import episode_tokens
from lopd.losses import token_log_probs
from lopd.supervision import align_supervision


@dataclass
class SFTConfig:
    """Where the demonstrations come from."""

    data: list[str] = field(default_factory=list)
    """JSONL files of Episode traces or ``{"messages": [...]}`` records."""
    min_reward: float = 0.0
    """Trace episodes below this reward are skipped (1.0 keeps only full passes)."""
    splits: list[str] = field(default_factory=lambda: ["train"])
    """Trace episodes from other splits are skipped (evaluation tasks never train)."""
    micro_plain: int = 0
    """Noisy-expert trajectories generated from the micro-world env (env.id must be a micro world)."""
    micro_referenced: int = 0
    """Referenced trajectories (a solved reference framed in the user message) from the micro world."""
    micro_seed: int = 0
    """Seed of the micro-world corpus."""
    max_tokens: int = 16384
    """Examples longer than this are dropped (counted in ``dropped``)."""


class SFTLearner(Learner[SFTConfig]):
    """Supervised fine-tuning on assistant tokens."""

    name = "sft"
    Config = SFTConfig
    uses_rollouts = False

    def __init__(self, ctx: LearnerContext):
        super().__init__(ctx)
        self.examples: list[tuple[list[int], list[int]]] = []
        self.dropped = 0
        for messages_or_ep in self._records():
            if isinstance(messages_or_ep, Episode):
                # the third value, the behaviour policy's logprobs, is for off-policy corrections;
                # SFT's NLL on the demonstration needs none
                ids, mask, _ = episode_tokens(messages_or_ep)
            else:
                ids, mask = conversation_tokens(ctx.tokenizer, messages_or_ep, ctx.template_kwargs)
            if len(ids) > self.cfg.max_tokens or not any(mask):
                self.dropped += 1
                continue
            self.examples.append((ids, mask))
        if not self.examples:
            raise ValueError("sft: no training example (set sft.data or sft.micro_plain/micro_referenced)")

    def _records(self):
        for path in self.cfg.data:
            for lineno, rec, error in json_lines(path):
                if error is not None:
                    raise ValueError(f"{path}:{lineno}: not JSON: {error}") from None
                if isinstance(rec, dict) and "env_id" in rec and "version" in rec:
                    ep = Episode.from_dict(rec)
                    if ep.split in self.cfg.splits and ep.reward >= self.cfg.min_reward:
                        has_ids = ep.prompt_token_ids is not None and all(s.token_ids is not None for s in ep.steps)
                        yield ep if has_ids else ep.messages
                elif isinstance(rec, dict) and isinstance(rec.get("messages"), list):
                    yield rec["messages"]
                else:
                    raise ValueError(f"{path}:{lineno}: neither an Episode trace nor a {{'messages': [...]}} record")
        if self.cfg.micro_plain or self.cfg.micro_referenced:
            from envs.micro.sft import sft_corpus

            env = self.ctx.make_env()
            for item in sft_corpus(env.unwrapped, self.cfg.micro_plain, self.cfg.micro_referenced, self.cfg.micro_seed):
                yield item["messages"]

    def dataset_ids(self) -> list[str]:
        return [str(i) for i in range(len(self.examples))]

    def train_step(self, batch: StepBatch) -> dict[str, float]:
        ctx, timer = self.ctx, Timer()
        rows = [self.examples[int(i)][0] for i in batch.items]
        masks = [self.examples[int(i)][1] for i in batch.items]
        n_tok = sum_floats([sum(map(sum, masks))], ctx.dist)[0]

        def loss_fn(k: int, idx: list[int]) -> tuple[torch.Tensor, dict[str, float]]:
            r, m = [rows[i] for i in idx], [masks[i] for i in idx]
            al = align_supervision(r, m, r, m, check_tokens=False)
            with timer("student"):
                ids, attn = pad_rows(r, pad_id(ctx.tokenizer), ctx.device)
                logp = ctx.scorer(ids, attn, positions=al.student_pos, per_chunk=token_log_probs,
                                  args=(al.targets.to(ctx.device),))
                return -(logp * al.mask.to(ctx.device)).sum() / max(n_tok, 1.0), {}

        sums = ctx.accumulate([len(r) for r in rows], loss_fn, timer=timer)
        with timer("student"):
            out = ctx.optimizer_step()
        return {"loss": sums["loss"], "tokens": n_tok, "dropped_examples": float(self.dropped), **out,
                **timer.metrics()}
