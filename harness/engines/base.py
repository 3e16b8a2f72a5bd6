"""The engine interface: rollouts and teacher scoring go through it, in-process or on a server.

Everything is token ids in, token ids out; an engine never re-tokenises text. Two engines
implement it: :class:`harness.engines.hf.HFEngine` (transformers, CPU or GPU) and
:class:`harness.engines.sglang.SGLangEngine` (HTTP client of a running SGLang server)::

    engine = HFEngine(model, tokenizer)
    outs = engine.generate([prompt_ids_a, prompt_ids_b],
                           SamplingParams(temperature=0.7, top_p=0.95, top_k=20, max_new_tokens=256, seed=1))
    outs[0].token_ids, outs[0].logprobs, outs[0].finish_reason      # sampled ids, their log-probs

    # teacher scoring: per position t >= start, log p(seq[t] | seq[:t]) and the top-k there
    scores = engine.score([full_ids], top_k=20, start=len(prompt_ids),
                          overrides=[EmbedOverride(positions=latent_pos, embeds=latents)])
    scores[0].token_logprobs, scores[0].topk_ids, scores[0].topk_logprobs

    engine.update_weights(student)          # in-process: copy weights; servers: a checkpoint path

Log-probs are those of the model's own distribution (log-softmax of the raw logits in fp32),
before temperature, top-k and top-p, so they are comparable with :meth:`Engine.score`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch


class EngineError(RuntimeError):
    """An engine could not serve a request (bad input, unreachable server, missing feature)."""


@dataclass
class SamplingParams:
    """How to sample a continuation (the fields of SGLang's ``sampling_params``)."""

    temperature: float = 1.0
    """Softmax temperature; 0 means greedy (argmax)."""
    top_p: float = 1.0
    """Nucleus sampling: keep the smallest set of tokens whose probability reaches top_p."""
    top_k: int = -1
    """Keep the k most likely tokens; <= 0 keeps the whole vocabulary."""
    max_new_tokens: int = 256
    """Most tokens to generate per sequence (>= 1)."""
    stop: list[str] = field(default_factory=list)
    """Stop strings: generation ends after the token that completes one (it stays in the output)."""
    stop_token_ids: list[int] = field(default_factory=list)
    """Token ids that end generation, besides the engine's end-of-sequence ids (kept in the output)."""
    ignore_eos: bool = False
    """Do not stop on the engine's end-of-sequence ids (``stop_token_ids`` still apply)."""
    seed: int | None = None
    """Seed of the sampler for this call; None draws from the global RNG."""

    def validate(self) -> SamplingParams:
        if not (self.temperature >= 0 and math.isfinite(self.temperature)):
            raise EngineError(f"temperature must be a finite number >= 0, got {self.temperature}")
        if not (0 < self.top_p <= 1):
            raise EngineError(f"top_p must be in (0, 1], got {self.top_p}")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise EngineError(f"max_new_tokens must be an int >= 1, got {self.max_new_tokens!r}")
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise EngineError("stop strings must be non-empty strings")
        return self

    def stop_fields(self) -> dict[str, Any]:
        """The stop settings as vLLM's and SGLang's requests spell them (only those that are set)."""
        out: dict[str, Any] = {}
        if self.stop:
            out["stop"] = list(self.stop)
        if self.stop_token_ids:
            out["stop_token_ids"] = [int(t) for t in self.stop_token_ids]
        if self.ignore_eos:
            out["ignore_eos"] = True
        return out


@dataclass
class EmbedOverride:
    """Embedding vectors that replace the token embeddings at given prompt positions.

    ``positions`` index the prompt (0-based, distinct, ascending); ``embeds`` is [len(positions),
    hidden]. Latent injection (:mod:`lopd.latent`) produces exactly this.
    """

    positions: list[int]
    embeds: torch.Tensor

    def __post_init__(self) -> None:
        self.positions = [int(p) for p in self.positions]
        if self.embeds.dim() != 2 or self.embeds.shape[0] != len(self.positions):
            raise EngineError(f"override embeds of shape {tuple(self.embeds.shape)} do not match "
                              f"{len(self.positions)} positions")
        if self.positions != sorted(set(self.positions)) or (self.positions and self.positions[0] < 0):
            raise EngineError("override positions must be distinct, ascending and >= 0")

    def check(self, seq_len: int, hidden: int | None = None) -> None:
        if self.positions and self.positions[-1] >= seq_len:
            raise EngineError(f"override position {self.positions[-1]} is outside a sequence of {seq_len}")
        if hidden is not None and self.embeds.shape[1] != hidden:
            raise EngineError(f"override width {self.embeds.shape[1]} != model hidden size {hidden}")


FinishReason = Literal["stop", "length"]


@dataclass
class GenerationOutput:
    """One sampled continuation."""

    token_ids: list[int]
    """Sampled ids, the stop token (or the token completing a stop string) included."""
    logprobs: list[float]
    """Log-prob of each sampled id under the model (raw logits, fp32)."""
    finish_reason: FinishReason
    """"stop" (stop token or string) or "length" (max_new_tokens reached)."""
    matched_stop: int | str | None = None
    """The stop token id or stop string that ended generation, if any."""
    text: str | None = None
    """Decoded text (convenience only; training uses ``token_ids``)."""
    prompt_len: int = 0
    """Number of prompt tokens."""
    cached_prompt_tokens: int = 0
    """Prompt tokens served from a cache instead of recomputed (prefix reuse across turns)."""


@dataclass
class ScoreOutput:
    """Teacher-forced log-probs of one sequence, for positions ``start .. len(seq) - 1``.

    Row ``i`` describes position ``t = start + i``: the distribution over the token at ``t``
    given ``seq[:t]``.
    """

    start: int
    token_logprobs: torch.Tensor
    """[n] fp32: log p(seq[t] | seq[:t])."""
    topk_ids: torch.Tensor
    """[n, k] int64: the k most likely ids at t (descending)."""
    topk_logprobs: torch.Tensor
    """[n, k] fp32: their log-probs (full-vocabulary log-softmax, not renormalised)."""

    def __len__(self) -> int:
        return int(self.token_logprobs.shape[0])


def check_prompts(prompts: Sequence[Sequence[int]], vocab_size: int | None = None,
                  what: str = "prompt") -> list[list[int]]:
    """Validate a batch of token id lists; returns plain ``list[list[int]]`` copies."""
    if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Sequence) or len(prompts) == 0:
        raise EngineError(f"expected a non-empty list of {what}s (lists of token ids)")
    out: list[list[int]] = []
    for i, p in enumerate(prompts):
        if isinstance(p, torch.Tensor):
            p = p.tolist()
        if isinstance(p, (str, bytes)) or not isinstance(p, Sequence) or len(p) == 0:
            raise EngineError(f"{what} {i} must be a non-empty list of token ids")
        ids = list(p)
        if any(not isinstance(t, int) or isinstance(t, bool) for t in ids):
            raise EngineError(f"{what} {i} holds a non-integer token id")
        if vocab_size is not None and (min(ids) < 0 or max(ids) >= vocab_size):
            raise EngineError(f"{what} {i} holds a token id outside [0, {vocab_size})")
        out.append(ids)
    return out


def check_overrides(overrides: Sequence[EmbedOverride | None] | None, lengths: Sequence[int],
                    hidden: int | None = None) -> list[EmbedOverride | None]:
    """One override (or None) per sequence, each inside its sequence."""
    if overrides is None:
        return [None] * len(lengths)
    if len(overrides) != len(lengths):
        raise EngineError(f"{len(overrides)} overrides given for {len(lengths)} sequences")
    for ov, n in zip(overrides, lengths):
        if ov is not None:
            if not isinstance(ov, EmbedOverride):
                raise EngineError(f"overrides must be EmbedOverride or None, got {type(ov).__name__}")
            ov.check(n, hidden)
    return list(overrides)


class Engine(ABC):
    """Generation and scoring over token ids. See the module docstring."""

    @abstractmethod
    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams | None = None,
                 overrides: Sequence[EmbedOverride | None] | None = None) -> list[GenerationOutput]:
        """Sample one continuation per prompt."""

    @abstractmethod
    def score(self, sequences: Sequence[Sequence[int]], *, top_k: int = 20, start: int | Sequence[int] = 1,
              overrides: Sequence[EmbedOverride | None] | None = None) -> list[ScoreOutput]:
        """Teacher-forced log-probs of every position from ``start`` (>= 1; per sequence or shared)."""

    @abstractmethod
    def update_weights(self, source: Any) -> None:
        """Load new weights: a module or state dict (in-process) or a checkpoint directory."""

    @property
    @abstractmethod
    def eos_token_ids(self) -> list[int]:
        """Ids that end generation unless ``ignore_eos``."""

    def close(self) -> None:
        """Release resources (caches, connections)."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def starts(start: int | Sequence[int], n: int, lengths: Sequence[int]) -> list[int]:
    """Per-sequence start positions for :meth:`Engine.score`, validated."""
    out = [int(start)] * n if isinstance(start, int) else [int(s) for s in start]
    if len(out) != n:
        raise EngineError(f"{len(out)} start positions for {n} sequences")
    for s, length in zip(out, lengths):
        if not 1 <= s <= length:
            raise EngineError(f"start {s} must be in [1, {length}] (position 0 has no prefix)")
    return out


def score_args(sequences: Sequence[Sequence[int]], top_k: int, start: int | Sequence[int],
               overrides: Sequence[EmbedOverride | None] | None, vocab_size: int | None = None,
               hidden: int | None = None) -> tuple[list[list[int]], list[EmbedOverride | None], list[int]]:
    """:meth:`Engine.score`'s arguments validated: (sequences, one override or None each, starts)."""
    seqs = check_prompts(sequences, vocab_size, what="sequence")
    lengths = [len(s) for s in seqs]
    ovs = check_overrides(overrides, lengths, hidden)
    st = starts(start, len(seqs), lengths)
    if top_k < 0 or (vocab_size is not None and top_k > vocab_size):
        raise EngineError(f"top_k must be in [0, {vocab_size or 'vocab'}], got {top_k}")
    return seqs, ovs, st


def row_seed(seed: int | None, row: int) -> int | None:
    """A distinct seed per row of one call, for engines that send one request per row (G copies of a
    prompt must not share a sample)."""
    return None if seed is None else (int(seed) * 1_000_003 + row) % (2 ** 63 - 1)
