"""Supervised pretraining of a causal LM on chat transcripts: masked next-token cross-entropy.

A transcript is encoded exactly as a token-in/token-out rollout (:mod:`harness.rollout`) lays
out its episode: the prompt (system, first user message, generation prompt), then per assistant
turn its content tokens and the end-of-turn token, then the chat template's rendering of what the
env answered. The loss covers only the assistant tokens (end-of-turn included), so the model
learns to act, not to predict tool results::

    examples = [encode_conversation(tok, msgs) for msgs in transcripts]   # Example(ids, mask)
    result = pretrain(model, examples, PretrainConfig(epochs=2, lr=3e-3))
    result.losses[0], result.losses[-1], result.seconds

Batches are built by length (sorted, cut into chunks under a padded-token budget, chunks
shuffled), so padding stays small. Everything is deterministic in ``cfg.seed``.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.config import Fraction, NonNegFloat, NonNegInt, PosFloat, PosInt
from harness.rollout import observation_messages, render_observation, render_prompt


@dataclass
class PretrainConfig:
    """How the supervised fit runs."""

    epochs: PosFloat = 2.0
    """Passes over the examples (fractions allowed: the last pass stops early)."""
    batch_tokens: PosInt = 8192
    """Most padded tokens in one batch (batch size x longest sequence)."""
    max_batch_size: PosInt = 32
    """Most sequences in one batch."""
    lr: PosFloat = 3e-3
    """Peak AdamW learning rate."""
    min_lr_ratio: Fraction = 0.1
    """Cosine decay ends at lr x this."""
    warmup_steps: NonNegInt = 20
    """Linear warm-up steps."""
    weight_decay: NonNegFloat = 0.01
    """AdamW weight decay (not on norms and biases)."""
    betas: tuple[float, float] = (0.9, 0.98)
    """AdamW betas."""
    grad_clip: float = 1.0
    """Global gradient-norm clip (<= 0: off)."""
    context_weight: NonNegFloat = 0.0
    """Weight of the next-token loss on the other (prompt, tool result) tokens, added to the assistant
    loss as ``assistant_ce + context_weight * context_ce``. 0 is the plain assistant-only fit; a small
    weight gives the model many more copy targets (names and ids repeat across results), which is
    what teaches a tiny model to copy unseen names and ids quickly."""
    max_len: PosInt = 2048
    """Longer examples are dropped (counted in the result), never cut mid-turn."""
    seed: int = 0
    """Seeds the batch order and torch's RNG during the fit."""
    threads: NonNegInt = 1
    """torch intra-op threads for the fit (0: leave torch's setting). One is the default: a tiny model
    gains little from a second thread, and on a shared, loaded CPU two threads spin-wait and run
    up to 20x slower."""
    progress: bool = True
    """Show a tqdm bar."""


@dataclass
class Example:
    """One training sequence."""

    ids: list[int]
    mask: list[int]
    """1 where the token is supervised (an assistant token), else 0."""

    def __post_init__(self) -> None:
        if len(self.ids) != len(self.mask):
            raise ValueError(f"mask has {len(self.mask)} entries for {len(self.ids)} tokens")
        if self.mask and self.mask[0]:
            raise ValueError("the first token cannot be supervised: no position predicts it")

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def n_supervised(self) -> int:
        return sum(self.mask)


@dataclass
class PretrainResult:
    """What a fit did."""

    steps: int
    losses: list[float] = field(default_factory=list)
    """Mean masked cross-entropy of every step's batch (nats per supervised token)."""
    tokens: int = 0
    """Real (unpadded) tokens processed."""
    supervised_tokens: int = 0
    seconds: float = 0.0
    """Wall time of the fit."""
    cpu_seconds: float = 0.0
    """Process CPU time of the fit (all threads)."""
    dropped: int = 0
    """Examples longer than max_len, left out."""

    def summary(self) -> dict[str, Any]:
        head = self.losses[: max(1, len(self.losses) // 10)]
        tail = self.losses[-max(1, len(self.losses) // 10):]
        return {
            "steps": self.steps, "tokens": self.tokens, "supervised_tokens": self.supervised_tokens,
            "seconds": round(self.seconds, 2), "cpu_seconds": round(self.cpu_seconds, 2), "dropped": self.dropped,
            "loss_first": round(sum(head) / len(head), 4) if self.losses else None,
            "loss_last": round(sum(tail) / len(tail), 4) if self.losses else None,
        }


def encode_conversation(tokenizer: Any, messages: Sequence[dict[str, Any]], **template_kwargs: Any) -> Example:
    """Token ids and assistant mask of a transcript, laid out as :func:`harness.rollout.rollout` does.

    ``messages``: system and user first, then assistant turns, each followed by the non-assistant
    messages the env answered (tool results, user notes). The assistant content is tokenised on
    its own and closed with the end-of-turn token (the tokenizer's ``eos_token``).
    """
    if len(messages) < 3 or messages[0].get("role") != "system" or messages[1].get("role") != "user":
        raise ValueError("a transcript starts with a system and a user message and has an assistant turn")
    eot = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
    ids = render_prompt(tokenizer, list(messages[:2]), **template_kwargs)
    mask = [0] * len(ids)
    i = 2
    while i < len(messages):
        m = messages[i]
        if m.get("role") != "assistant":
            raise ValueError(f"message {i} should be an assistant turn, got role {m.get('role')!r}")
        turn = list(tokenizer.encode(str(m.get("content") or ""), add_special_tokens=False)) + [eot]
        ids += turn
        mask += [1] * len(turn)
        j = i + 1
        while j < len(messages) and messages[j].get("role") != "assistant":
            j += 1
        obs = observation_messages(list(messages[i + 1:j]), "")
        if obs:
            o = render_observation(tokenizer, obs, **template_kwargs)
            if o and o[0] == eot:  # the turn already ends with it (as a sampled end-of-turn would)
                o = o[1:]
            ids += o
            mask += [0] * len(o)
        i = j
    return Example(ids, mask)


def length_batches(lengths: Sequence[int], batch_tokens: int, max_batch_size: int,
                   rng: random.Random) -> list[list[int]]:
    """Indices grouped by similar length under a padded-token budget; the batch order is shuffled.

    >>> length_batches([5, 3, 9, 4], batch_tokens=10, max_batch_size=8, rng=random.Random(0))
    [[1, 3], [0], [2]]
    """
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        width = max(lengths[i], max((lengths[j] for j in cur), default=0))
        if cur and (width * (len(cur) + 1) > batch_tokens or len(cur) >= max_batch_size):
            batches.append(cur)
            cur = []
        cur.append(i)
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def collate(examples: Sequence[Example], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded (input_ids, attention_mask, loss_mask) tensors [B, T]."""
    width = max(len(e) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(examples), width), dtype=torch.long)
    loss = torch.zeros((len(examples), width), dtype=torch.bool)
    for b, e in enumerate(examples):
        n = len(e)
        ids[b, :n] = torch.tensor(e.ids)
        attn[b, :n] = 1
        loss[b, :n] = torch.tensor(e.mask, dtype=torch.bool)
    return ids, attn, loss


def masked_nll(model: torch.nn.Module, ids: torch.Tensor, attn: torch.Tensor,
               loss_mask: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Summed next-token NLL over supervised positions (fp32 log-softmax) and their count."""
    nll, n, _, _ = split_nll(model, ids, attn, loss_mask, context=False)
    return nll, n


def split_nll(model: torch.nn.Module, ids: torch.Tensor, attn: torch.Tensor, loss_mask: torch.Tensor,
              context: bool = True) -> tuple[torch.Tensor, int, torch.Tensor, int]:
    """(summed NLL, count) over supervised tokens and over the other real tokens (``context``; zeros
    when False). The LM head runs only where a loss is taken."""
    hidden = model.model(input_ids=ids, attention_mask=attn, use_cache=False).last_hidden_state
    head = model.get_output_embeddings()
    sup = loss_mask[:, 1:]
    out = []
    for sel in (sup, (attn[:, 1:].bool() & ~sup) if context else None):
        if sel is None:
            out += [hidden.new_zeros(()), 0]
            continue
        targets = ids[:, 1:][sel]
        logits = head(hidden[:, :-1][sel]).float()  # only the positions that predict a kept token
        out += [torch.nn.functional.cross_entropy(logits, targets, reduction="sum"), int(targets.numel())]
    return out[0], out[1], out[2], out[3]


@torch.no_grad()
def evaluate_loss(model: torch.nn.Module, examples: Sequence[Example], pad_id: int,
                  batch_tokens: int = 8192) -> float:
    """Mean masked next-token NLL of ``examples`` (nats per supervised token)."""
    was = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        for idx in length_batches([len(e) for e in examples], batch_tokens, 64, random.Random(0)):
            nll, n = masked_nll(model, *collate([examples[i] for i in idx], pad_id))
            total, count = total + float(nll), count + n
    finally:
        model.train(was)
    return total / max(count, 1)


def _param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    decay, no_decay, seen = [], [], set()
    for name, p in model.named_parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        (no_decay if p.dim() < 2 or "norm" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def lr_at(step: int, total: int, cfg: PretrainConfig) -> float:
    """Linear warm-up to ``cfg.lr``, then cosine decay to ``cfg.lr * cfg.min_lr_ratio``."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    span = max(1, total - cfg.warmup_steps)
    t = min(1.0, (step - cfg.warmup_steps) / span)
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t)))


def pretrain(model: torch.nn.Module, examples: Sequence[Example], cfg: PretrainConfig | None = None, *,
             pad_id: int = 0) -> PretrainResult:
    """Fit ``model`` on ``examples`` in place (masked next-token CE, AdamW, cosine schedule)."""
    cfg = cfg or PretrainConfig()
    kept, plan = _batch_plan(examples, cfg)
    result = PretrainResult(steps=0, dropped=len(examples) - len(kept))
    opt = torch.optim.AdamW(_param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=cfg.betas)
    old_threads = torch.get_num_threads()
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    bar = None
    if cfg.progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(plan), desc="pretrain", unit="step", dynamic_ncols=True)
    t0, c0 = time.perf_counter(), time.process_time()
    model.train()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            for step, idx in enumerate(plan):
                batch = [kept[i] for i in idx]
                value, n = _train_step(model, opt, batch, lr_at(step, len(plan), cfg), cfg, pad_id)
                if not math.isfinite(value):
                    raise FloatingPointError(f"pretraining loss became {value} at step {step}")
                result.losses.append(value)
                result.tokens += sum(len(e) for e in batch)
                result.supervised_tokens += n
                result.steps += 1
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{value:.3f}")
    finally:
        if bar is not None:
            bar.close()
        if cfg.threads > 0:
            torch.set_num_threads(old_threads)
        model.eval()
    result.seconds = time.perf_counter() - t0
    result.cpu_seconds = time.process_time() - c0
    return result


def _batch_plan(examples: Sequence[Example], cfg: PretrainConfig) -> tuple[list[Example], list[list[int]]]:
    """The trainable examples (fitting ``max_len``, with a supervised token) and the batches of their
    indices, ``cfg.epochs`` passes of length-bucketed batches (a fractional last pass cut short)."""
    if cfg.context_weight < 0:
        raise ValueError(f"context_weight must be >= 0, got {cfg.context_weight}")
    if cfg.epochs <= 0:
        raise ValueError(f"epochs must be > 0, got {cfg.epochs}")
    kept = [e for e in examples if len(e) <= cfg.max_len and e.n_supervised > 0]
    if not kept:
        raise ValueError("no example to train on (all empty or longer than max_len)")
    rng = random.Random(f"pretrain:{cfg.seed}")
    lengths = [len(e) for e in kept]
    plan: list[list[int]] = []
    for _ in range(math.ceil(cfg.epochs)):
        plan += length_batches(lengths, cfg.batch_tokens, cfg.max_batch_size, rng)
    per_epoch = len(plan) // math.ceil(cfg.epochs)
    return kept, plan[: max(1, round(per_epoch * cfg.epochs))]


def _train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, batch: list[Example], lr: float,
                cfg: PretrainConfig, pad_id: int) -> tuple[float, int]:
    """One AdamW step at ``lr`` on ``batch``: the supervised tokens' mean NLL, plus ``cfg.context_weight``
    times the other tokens' when set. Returns the supervised loss and its token count."""
    for g in opt.param_groups:
        g["lr"] = lr
    nll, n, c_nll, c_n = split_nll(model, *collate(batch, pad_id), context=cfg.context_weight > 0)
    loss = nll / max(n, 1)
    total = loss + cfg.context_weight * c_nll / max(c_n, 1) if cfg.context_weight > 0 else loss
    opt.zero_grad(set_to_none=True)
    total.backward()
    if cfg.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    opt.step()
    return float(loss.detach()), n
