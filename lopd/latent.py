"""Latent injection: a sentinel string in the prompt becomes a run of latent vectors.

The privileged context of LOPD is a list of continuous vectors (96 = 3 experiences x 32). They
enter the teacher's prompt like ordinary tokens:

1. the first user message gets framing text that holds the sentinel :data:`LATENT_SENTINEL`
   (:func:`frame_user_message`);
2. after tokenisation the sentinel becomes a run of placeholder tokens, one per latent
   (:func:`encode_with_latents` for text, :func:`expand_sentinel` for token ids);
3. the placeholder embeddings are replaced by the latent vectors with ``torch.cat`` (embeds
   before, latents, embeds after), so gradients reach the latents (:func:`inject`,
   :func:`inject_batch`). Positions stay ordinary consecutive positions.

Example (any tokenizer with ``encode``; the project's own tokenizer has the sentinel as one
special token, so the text path and the id path agree)::

    text = frame_user_message("Buy 2 apples.")                    # holds LATENT_SENTINEL once
    enc = encode_with_latents(tokenizer, text, n_latents=96)       # enc.ids, enc.positions
    embeds = inject(model.get_input_embeddings()(torch.tensor(enc.ids)),
                    enc.positions, latents)                        # latents: [96, hidden]
    logits = model(inputs_embeds=embeds[None]).logits               # grads flow into `latents`

The placeholder id only has to be a single token the model never sees otherwise: the project's
tokenizer has ``<|LATENT_PH|>``; for a stock Qwen3 tokenizer :func:`placeholder_token_id` falls
back to ``<|image_pad|>`` (a single unused special token there). Its embedding never reaches the
model on the embedding path, so the choice does not matter numerically.

This module is torch-only (no transformers import) and stable: the composer, the losses and
the engines build on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

LATENT_SENTINEL = "<|LATENT_PH|>"
"""The string that marks where the latents go (the authors' sentinel)."""

PLACEHOLDER_TOKEN = LATENT_SENTINEL
"""The placeholder token in the project's tokenizer: the sentinel itself is one special token."""

FALLBACK_PLACEHOLDER_TOKENS = (PLACEHOLDER_TOKEN, "<|image_pad|>", "<|vision_pad|>", "<|video_pad|>")
"""Single special tokens tried in order when a tokenizer has no ``<|LATENT_PH|>`` (stock Qwen3)."""

DEFAULT_FRAMING = (
    "Reference experience: below is compressed experience from a different task that has "
    "already been solved successfully. Use it only as guidance; it is not the task you must "
    "solve now.\n{latents}\n\nYour task:\n{task}"
)
"""Framing of the first user message. ``{latents}`` takes the sentinel, ``{task}`` the prompt."""

AUTHORS_FRAMING = (
    "The following is a REFERENCE EXAMPLE of a different task that has already been solved. It is "
    "not your task.\n{latents}\n--- end of reference example ---\n\n"
    "Now complete YOUR task below, starting from scratch.\n{task}"
)
"""The authors' framing (their memory/prompt_protocol.py). The quoted parts of ../shared/METHOD.md
are verbatim; the words between them, which that summary elides, are ours."""

FRAMINGS = {"paper": DEFAULT_FRAMING, "authors": AUTHORS_FRAMING}
"""Framings by name: a config's ``framing`` may name one instead of holding the text."""


def framing_text(framing: str) -> str:
    """The framing text of ``framing``: a name in :data:`FRAMINGS`, or the text itself.

    >>> framing_text("authors") == AUTHORS_FRAMING, framing_text("Ref: {latents} {task}")
    (True, 'Ref: {latents} {task}')
    """
    text = FRAMINGS.get(framing, framing)
    if "{latents}" not in text:
        raise LatentError(f"framing {framing[:40]!r} is neither a name ({', '.join(FRAMINGS)}) nor a text "
                          "holding '{latents}'")
    return text


class LatentError(ValueError):
    """Sentinels, placeholders and latents that do not line up."""


@dataclass(frozen=True)
class LatentIds:
    """Token ids with latent slots, and where those slots are."""

    ids: list[int]
    """Token ids; each latent slot holds the placeholder id."""
    positions: list[int]
    """Index into ``ids`` of every latent slot, ascending (len == total number of latents)."""


def frame_user_message(task_text: str, *, sentinel: str = LATENT_SENTINEL,
                       framing: str = DEFAULT_FRAMING) -> str:
    """The first user message with the latent reference framed in.

    >>> frame_user_message("Buy 2 apples.").count(LATENT_SENTINEL)
    1
    """
    if "{latents}" not in framing:
        raise LatentError("framing text must contain '{latents}'")
    if sentinel in task_text:
        raise LatentError(f"the task text already contains the sentinel {sentinel!r}")
    return framing.replace("{latents}", sentinel).replace("{task}", task_text)


def _token_to_id(tokenizer: Any, token: str) -> int | None:
    # Works for transformers tokenizers and for a bare `tokenizers.Tokenizer`.
    if hasattr(tokenizer, "convert_tokens_to_ids"):
        tid = tokenizer.convert_tokens_to_ids(token)
        if tid is not None and tid == getattr(tokenizer, "unk_token_id", None) and token != tokenizer.unk_token:
            tid = None
    else:
        tid = tokenizer.token_to_id(token)
    return tid if isinstance(tid, int) else None


def _encode(tokenizer: Any, text: str) -> list[int]:
    if hasattr(tokenizer, "convert_tokens_to_ids"):
        return list(tokenizer.encode(text, add_special_tokens=False))
    return list(tokenizer.encode(text, add_special_tokens=False).ids)  # a bare tokenizers.Tokenizer


def placeholder_token_id(tokenizer: Any, token: str | None = None) -> int:
    """The id of the placeholder token: ``token`` if given, else the first of
    :data:`FALLBACK_PLACEHOLDER_TOKENS` the tokenizer has as a single token."""
    candidates = (token,) if token else FALLBACK_PLACEHOLDER_TOKENS
    for tok in candidates:
        tid = _token_to_id(tokenizer, tok)
        if tid is not None:
            return tid
    raise LatentError(f"the tokenizer has none of the placeholder tokens {list(candidates)}; "
                      "add one as a special token")


def _counts(n_latents: int | Sequence[int], n_sentinels: int) -> list[int]:
    if isinstance(n_latents, int):
        counts = [n_latents] * n_sentinels
    else:
        counts = [int(n) for n in n_latents]
        if len(counts) != n_sentinels:
            raise LatentError(f"{len(counts)} latent counts given for {n_sentinels} sentinel(s)")
    if any(n < 0 for n in counts):
        raise LatentError(f"latent counts must be >= 0, got {counts}")
    return counts


def encode_with_latents(tokenizer: Any, text: str, n_latents: int | Sequence[int], *,
                        sentinel: str = LATENT_SENTINEL, placeholder_id: int | None = None) -> LatentIds:
    """Tokenise ``text``; every occurrence of ``sentinel`` becomes a run of placeholder tokens.

    ``n_latents`` is the run length of every occurrence (an int) or one length per occurrence.
    The text around each sentinel is encoded on its own, so the sentinel never merges with
    neighbouring characters, whatever the tokenizer. Text without a sentinel is an error unless
    ``n_latents`` is 0 or empty.
    """
    pid = placeholder_token_id(tokenizer) if placeholder_id is None else placeholder_id
    pieces = text.split(sentinel)
    counts = _counts(n_latents, len(pieces) - 1)
    if not counts and (n_latents if isinstance(n_latents, int) else len(n_latents)):
        raise LatentError(f"text has no sentinel {sentinel!r} for the latents")
    ids: list[int] = []
    positions: list[int] = []
    for i, piece in enumerate(pieces):
        if piece:
            ids.extend(_encode(tokenizer, piece))
        if i < len(counts):
            positions.extend(range(len(ids), len(ids) + counts[i]))
            ids.extend([pid] * counts[i])
    return LatentIds(ids, positions)


def expand_sentinel(token_ids: Sequence[int], n_latents: int | Sequence[int], *, sentinel_id: int,
                    placeholder_id: int | None = None) -> LatentIds:
    """Token-level expansion: each ``sentinel_id`` in ``token_ids`` becomes ``n`` placeholders.

    Use it when the sentinel is one token of the tokenizer (the project's tokenizer). The
    placeholder defaults to the sentinel id itself.

    >>> expand_sentinel([5, 9, 6], 3, sentinel_id=9)
    LatentIds(ids=[5, 9, 9, 9, 6], positions=[1, 2, 3])
    """
    pid = sentinel_id if placeholder_id is None else placeholder_id
    n_sent = sum(1 for t in token_ids if t == sentinel_id)
    counts = _counts(n_latents, n_sent)
    ids: list[int] = []
    positions: list[int] = []
    k = 0
    for t in token_ids:
        if t == sentinel_id:
            positions.extend(range(len(ids), len(ids) + counts[k]))
            ids.extend([pid] * counts[k])
            k += 1
        else:
            ids.append(int(t))
    return LatentIds(ids, positions)


def latent_positions(token_ids: Sequence[int], placeholder_id: int) -> list[int]:
    """Indices of every placeholder token in ``token_ids``."""
    return [i for i, t in enumerate(token_ids) if t == placeholder_id]


def _runs(positions: Sequence[int]) -> list[tuple[int, int]]:
    """Split ascending positions into contiguous [start, end) runs."""
    runs: list[tuple[int, int]] = []
    for p in positions:
        if runs and p == runs[-1][1]:
            runs[-1] = (runs[-1][0], p + 1)
        else:
            runs.append((p, p + 1))
    return runs


def inject(embeds: torch.Tensor, positions: Sequence[int], latents: torch.Tensor) -> torch.Tensor:
    """Replace rows ``positions`` of ``embeds`` [T, d] by ``latents`` [len(positions), d].

    Built with ``torch.cat`` (no in-place write), so gradients reach both ``latents`` and any
    embedding rows kept. ``latents`` are cast to ``embeds``' dtype and device.
    """
    if embeds.dim() != 2:
        raise LatentError(f"inject expects embeds [T, d], got shape {tuple(embeds.shape)}")
    positions = [int(p) for p in positions]
    if latents.dim() != 2 or latents.shape[0] != len(positions) or latents.shape[1] != embeds.shape[1]:
        raise LatentError(f"latents of shape {tuple(latents.shape)} do not fit {len(positions)} "
                          f"positions of width {embeds.shape[1]}")
    if not positions:
        return embeds
    if positions != sorted(set(positions)) or positions[0] < 0 or positions[-1] >= embeds.shape[0]:
        raise LatentError(f"positions must be distinct, ascending and inside [0, {embeds.shape[0]})")
    latents = latents.to(dtype=embeds.dtype, device=embeds.device)
    parts: list[torch.Tensor] = []
    prev = used = 0
    for start, end in _runs(positions):
        parts.append(embeds[prev:start])
        parts.append(latents[used:used + end - start])
        used += end - start
        prev = end
    parts.append(embeds[prev:])
    return torch.cat(parts, dim=0)


def inject_batch(embeds: torch.Tensor, positions: Sequence[Sequence[int]],
                 latents: Sequence[torch.Tensor | None]) -> torch.Tensor:
    """:func:`inject` row by row for ``embeds`` [B, T, d]; a row with no latents stays as is."""
    if embeds.dim() != 3 or len(positions) != embeds.shape[0] or len(latents) != embeds.shape[0]:
        raise LatentError("inject_batch needs embeds [B, T, d] and one positions/latents entry per row")
    rows = [embeds[b] if lat is None or len(pos) == 0 else inject(embeds[b], pos, lat)
            for b, (pos, lat) in enumerate(zip(positions, latents))]
    return torch.stack(rows, dim=0)
