"""Cold start: warm the composer with next-token NLL through the frozen base, latents injected.

Each example pairs the top-3 retrieved experiences of a task with a successful trajectory of the
base model on that task. The trajectory's token ids hold a run of placeholder tokens (one per
latent, from :func:`lopd.latent.encode_with_latents` or :func:`lopd.latent.expand_sentinel`);
the composer's latents replace them and the frozen base (adapter disabled) scores the
trajectory. Only assistant tokens are supervised. Gradients reach the LoRA and the QFormer
through the latents alone.

    opt = make_coldstart_optimizer(composer, cfg)
    for batch in batches:                      # cfg.batch_size examples each
        stats = coldstart_step(composer, batch, opt, cfg)
    composer.set_anchor()                      # c_phi0 for the RL anchor term
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from lopd.chunked import chunked_head
from lopd.composer import Composer
from lopd.config import ColdStartConfig
from lopd.latent import inject
from lopd.losses import token_log_probs


@dataclass
class ColdStartExample:
    """One (retrieved experiences -> successful trajectory) pair."""

    task: str
    """The task text the composer is conditioned on."""
    experiences: list[str]
    """Retrieved experience texts, in retrieval order."""
    input_ids: list[int]
    """The trajectory's token ids, with one placeholder token per latent."""
    latent_positions: list[int]
    """Indices of the placeholders in ``input_ids`` (len = len(experiences) x n_latents)."""
    loss_mask: list[int]
    """1 at supervised (assistant) tokens of ``input_ids``, else 0."""

    def __post_init__(self) -> None:
        if len(self.loss_mask) != len(self.input_ids):
            raise ValueError(f"loss_mask has {len(self.loss_mask)} entries for {len(self.input_ids)} tokens")
        if self.loss_mask and self.loss_mask[0]:
            raise ValueError("the first token cannot be supervised: no logits predict it")
        if any(self.loss_mask[p] for p in self.latent_positions):
            raise ValueError("latent slots must not be supervised")

    @property
    def n_supervised(self) -> int:
        return sum(1 for m in self.loss_mask if m)


def next_token_nll(
    logits: Tensor, input_ids: Tensor, loss_mask: Tensor, count: float | Tensor | None = None
) -> tuple[Tensor, int]:
    """Sum of -log p(token j | < j) over tokens with ``loss_mask`` / ``count`` (None: their number).

    ``logits`` [B, T, V] from the same forward as ``input_ids`` [B, T]; fp32 log-softmax.
    Returns the loss and the number of supervised tokens.

    >>> logits = torch.zeros(1, 3, 4); ids = torch.tensor([[0, 1, 2]])
    >>> loss, n = next_token_nll(logits, ids, torch.tensor([[0, 1, 1]]))
    >>> round(float(loss), 4), n   # uniform over 4 tokens: ln 4
    (1.3863, 2)
    """
    mask = loss_mask[:, 1:].bool()
    nll = -token_log_probs(logits[:, :-1], input_ids[:, 1:])
    n = int(mask.sum())
    total = (nll * mask).sum()
    denom = float(n if count is None else count)
    return total / max(denom, 1.0), n


def _teacher_nll_sum(
    composer: Composer, examples: Sequence[ColdStartExample], latents: Sequence[Tensor]
) -> tuple[Tensor, int]:
    """Summed NLL of the supervised tokens, teacher = frozen base with the latents spliced in."""
    emb = composer.input_embeddings()
    device = emb.weight.device
    width = max(len(e.input_ids) for e in examples)
    rows, masks, sup = [], [], []
    for ex, lat in zip(examples, latents):
        ids = torch.tensor(ex.input_ids, dtype=torch.long, device=device)
        e = inject(emb(ids), ex.latent_positions, lat)
        pad = width - e.shape[0]
        rows.append(torch.cat([e, e.new_zeros(pad, e.shape[1])]) if pad else e)
        masks.append(torch.tensor([1] * len(ex.input_ids) + [0] * pad, device=device))
        sup.append(torch.tensor(list(ex.loss_mask) + [0] * pad, device=device))
    embeds, attn, sup_mask = torch.stack(rows), torch.stack(masks), torch.stack(sup).bool()
    targets = torch.stack(
        [
            torch.tensor(list(ex.input_ids) + [0] * (width - len(ex.input_ids)), device=device)
            for ex in examples
        ]
    )
    sel = sup_mask[:, 1:]  # logits at j predict token j + 1
    n = int(sel.sum())
    with composer.teacher_mode() as lm:
        hidden = lm.get_decoder()(
            inputs_embeds=embeds, attention_mask=attn, use_cache=False
        ).last_hidden_state
        # only the supervised rows, the head over chunks of them (no [n, V] logits); the head has
        # no adapter, so the backward's recomputation outside teacher_mode is the same head
        head = lm.get_output_embeddings()
        logp = chunked_head(head, hidden[:, :-1][sel], token_log_probs, targets[:, 1:][sel])
    return -logp.sum(), n


def coldstart_loss(
    composer: Composer, examples: Sequence[ColdStartExample], count: float | None = None
) -> tuple[Tensor, int]:
    """Cold-start NLL of ``examples``: summed over their assistant tokens / ``count`` (None: their number).

    Pass the global token count of the whole batch as ``count`` when accumulating micro-batches.
    """
    if not examples:
        raise ValueError("no cold-start examples")
    for ex in examples:
        want = len(ex.experiences) * composer.n_latents
        if len(ex.latent_positions) != want:
            raise ValueError(
                f"task {ex.task[:40]!r}: {len(ex.latent_positions)} latent slots for "
                f"{len(ex.experiences)} experiences x {composer.n_latents} latents"
            )
    latents = composer.encode([e.task for e in examples], [e.experiences for e in examples])
    total, n = _teacher_nll_sum(composer, examples, latents)
    denom = float(n if count is None else count)
    return total / max(denom, 1.0), n


ColdStartOptimizer = torch.optim.AdamW | dict[str, torch.optim.AdamW]
"""One AdamW with a ``lora`` and a ``qformer`` group, or one AdamW per group (``separate_optimizers``)."""


def make_coldstart_optimizer(composer: Composer, cfg: ColdStartConfig | None = None) -> ColdStartOptimizer:
    """AdamW over the composer's LoRA and QFormer: two named param groups of one optimiser (same lr),
    or with ``cfg.separate_optimizers`` one optimiser each (the authors' code)."""
    cfg = cfg or ColdStartConfig()
    groups = composer.parameter_groups()
    if cfg.separate_optimizers:
        return {name: torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
                for name, params in groups.items()}
    return torch.optim.AdamW(
        [{"params": groups["lora"], "name": "lora"}, {"params": groups["qformer"], "name": "qformer"}],
        lr=cfg.lr,
        weight_decay=cfg.weight_decay,
    )


def _step_finite(optimizer: ColdStartOptimizer, norms: dict[str, float]) -> bool:
    """Step what has finite gradient norms (per optimiser when there are two and the clips are
    separate); True when everything stepped."""
    stepped = True
    for name, opt in (optimizer if isinstance(optimizer, dict) else {"all": optimizer}).items():
        own = norms.get(f"{name}_grad_norm")  # a group's own norm when the clips are separate
        if all(math.isfinite(v) for v in ([own] if own is not None else norms.values())):
            opt.step()
        else:
            stepped = False
        opt.zero_grad(set_to_none=True)
    return stepped


def clip_composer_grads(
    composer: Composer, grad_clip: float, qformer_grad_clip: float | None = None
) -> dict[str, float]:
    """Clip one norm over all trainable parameters, or (``qformer_grad_clip`` set) the QFormer and
    the LoRA separately. Returns the pre-clip norms; <= 0 disables a clip."""
    groups = composer.parameter_groups()

    def clip(params: list[Tensor], limit: float) -> float:
        params = [p for p in params if p.grad is not None]
        if not params:
            return 0.0
        return float(torch.nn.utils.clip_grad_norm_(params, limit if limit > 0 else math.inf))

    if qformer_grad_clip is None:
        return {"grad_norm": clip(groups["lora"] + groups["qformer"], grad_clip)}
    return {
        "lora_grad_norm": clip(groups["lora"], grad_clip),
        "qformer_grad_norm": clip(groups["qformer"], qformer_grad_clip),
    }


def coldstart_step(
    composer: Composer,
    examples: Sequence[ColdStartExample],
    optimizer: ColdStartOptimizer,
    cfg: ColdStartConfig | None = None,
) -> dict[str, float]:
    """One optimiser step on ``examples`` in micro-batches, normalised by their total token count.

    Returns ``{"loss", "tokens", "skipped", <grad norms>}``; a step with no supervised token or a
    non-finite gradient norm is skipped (no update).
    """
    cfg = cfg or ColdStartConfig()
    total_tokens = sum(e.n_supervised for e in examples)
    for opt in optimizer.values() if isinstance(optimizer, dict) else [optimizer]:
        opt.zero_grad(set_to_none=True)
    if total_tokens == 0:
        return {"loss": 0.0, "tokens": 0.0, "skipped": 1.0}
    loss_sum = 0.0
    mb = max(1, cfg.micro_batch_size)
    for i in range(0, len(examples), mb):
        part = examples[i : i + mb]
        if not any(e.n_supervised for e in part):
            continue
        loss, _ = coldstart_loss(composer, part, count=total_tokens)
        loss.backward()
        loss_sum += float(loss.detach())
    norms = clip_composer_grads(composer, cfg.grad_clip, cfg.qformer_grad_clip)
    finite = _step_finite(optimizer, norms)
    return {"loss": loss_sum, "tokens": float(total_tokens), "skipped": 0.0 if finite else 1.0, **norms}
