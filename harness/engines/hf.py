"""In-process engine over a ``transformers`` causal LM (CPU or GPU), with its own decode loop.

* Batched generation over a KV cache (``DynamicCache``): left-padded prefill, then one forward
  per step for the whole batch; per-sequence stop tokens, stop strings and lengths; seeded
  sampling (temperature, top-k, top-p). Log-probs are the model's raw log-softmax.
* Prefix reuse across calls: the KV cache of the last batch is kept. When every prompt of the
  next call extends one of the kept sequences token for token (the next turn of a multi-turn
  rollout: sampled tokens + observation tokens), only the new tokens are prefilled. Rows may
  grow by different amounts; padding columns in the middle are masked and positions stay
  consecutive per row.
* Embedding overrides (latent injection) on the prefill through ``inputs_embeds``.
* Scoring through one forward over the full sequences, micro-batched by a token budget, with
  the LM head applied in chunks of positions so the [tokens, vocab] logits never materialise at once.

>>> from harness.models import build_tiny_model
>>> model, tok = build_tiny_model("1m")
>>> eng = HFEngine(model, tok)
>>> out = eng.generate([[5, 6, 7]], SamplingParams(temperature=0, max_new_tokens=4))[0]
>>> len(out.token_ids) <= 4 and len(out.logprobs) == len(out.token_ids)
True
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import DynamicCache

from harness.engines.base import (
    EmbedOverride, Engine, EngineError, GenerationOutput, SamplingParams, ScoreOutput, check_overrides,
    check_prompts, score_args,
)
from lopd.latent import inject
from lopd.losses import upcast


@dataclass
class _KVState:
    """The KV cache kept after a generate call, and what each of its rows holds."""

    cache: DynamicCache
    mask: torch.Tensor  # [B, C] 1 where a column holds a real token of that row
    tokens: list[list[int]]  # per row: the tokens whose keys/values are cached, in column order
    overrides: list[EmbedOverride | None]


@dataclass
class _Decoded:
    """What one generate call has sampled so far, per row."""

    ids: list[list[int]]
    logprobs: list[list[float]]
    reason: list[str | None]  # "stop" or "length" once the row has finished
    matched: list[int | str | None]  # the stop token or stop string that finished it

    @classmethod
    def empty(cls, b: int) -> _Decoded:
        return cls([[] for _ in range(b)], [[] for _ in range(b)], [None] * b, [None] * b)


def _same_override(a: EmbedOverride | None, b: EmbedOverride | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.positions == b.positions and a.embeds.shape == b.embeds.shape and bool(
        torch.equal(a.embeds.detach().cpu(), b.embeds.detach().cpu()))


class HFEngine(Engine):
    """Engine over an in-process ``transformers`` model. See the module docstring.

    ``tokenizer`` is needed only for stop strings and output text. ``score_token_budget``
    bounds the tokens of one scoring forward; ``logits_chunk`` the positions per LM-head chunk.
    """

    def __init__(self, model: torch.nn.Module, tokenizer: Any = None, *, prefix_cache: bool = True,
                 score_token_budget: int = 16384, logits_chunk: int = 1024,
                 eos_token_ids: Sequence[int] | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.prefix_cache = prefix_cache
        self.score_token_budget = int(score_token_budget)
        self.logits_chunk = int(logits_chunk)
        cfg = model.config
        self.vocab_size = int(cfg.vocab_size)
        self.hidden_size = int(cfg.hidden_size)
        if eos_token_ids is None:
            eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
            eos = eos if eos is not None else cfg.eos_token_id
            eos_token_ids = [eos] if isinstance(eos, int) else list(eos or [])
        self._eos = [int(e) for e in eos_token_ids]
        pad = getattr(cfg, "pad_token_id", None)
        if pad is None and tokenizer is not None:
            pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else (self._eos[0] if self._eos else 0))
        self._kv: _KVState | None = None
        self.weight_version = 0
        # transformers 5.x renamed the cache argument; keep working with both spellings.
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, *, dtype: Any = None, device: Any = None,
                        **kwargs: Any) -> HFEngine:
        """Load a model directory (tiny or real Qwen3) with :func:`harness.models.load_model`."""
        from harness.models import load_model

        model, tok = load_model(path, dtype=dtype, device=device)
        return cls(model, tok, **kwargs)

    # ---- interface ------------------------------------------------------------------------
    @property
    def eos_token_ids(self) -> list[int]:
        return list(self._eos)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def clear_cache(self) -> None:
        """Drop the kept KV cache (frees its memory)."""
        self._kv = None

    def close(self) -> None:
        self.clear_cache()

    def update_weights(self, source: Any) -> None:
        """Copy weights from a module, a state dict, or a checkpoint directory (safetensors).

        Passing the engine's own model (the in-process student) only drops the KV cache.
        """
        self.clear_cache()
        self.weight_version += 1
        if source is self.model:
            return
        if isinstance(source, torch.nn.Module):
            state = source.state_dict()
        elif isinstance(source, dict):
            state = source
        elif isinstance(source, (str, os.PathLike)):
            state = _load_safetensors_dir(Path(source))
        else:
            raise EngineError(f"cannot load weights from {type(source).__name__}")
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        tied = {"lm_head.weight"} if getattr(self.model.config, "tie_word_embeddings", False) else set()
        if set(missing) - tied or unexpected:
            raise EngineError(f"weights do not fit the model: missing {sorted(set(missing) - tied)[:5]}, "
                              f"unexpected {sorted(unexpected)[:5]}")

    # ---- generation -----------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams | None = None,
                 overrides: Sequence[EmbedOverride | None] | None = None) -> list[GenerationOutput]:
        params = (params or SamplingParams()).validate()
        prompts = check_prompts(prompts, self.vocab_size)
        ovs = check_overrides(overrides, [len(p) for p in prompts], self.hidden_size)
        was_training = self.model.training
        self.model.eval()
        try:
            return self._generate(prompts, params, ovs)
        finally:
            self.model.train(was_training)

    def _generate(self, prompts: list[list[int]], params: SamplingParams,
                  ovs: list[EmbedOverride | None]) -> list[GenerationOutput]:
        cache, mask, logits, reused = self._start(prompts, ovs)
        gen, stop_tensor, tail = self._decode_setup(params)
        dec = _Decoded.empty(len(prompts))
        active = torch.ones(len(prompts), dtype=torch.bool, device=self.device)
        positions = mask.long().sum(-1) - 1  # position of each row's last real token
        for step in range(params.max_new_tokens):
            nxt, chosen_lp, hit_stop = self._next_tokens(logits, params, gen, stop_tensor, active)
            self._record(dec, nxt, chosen_lp, hit_stop, active, params, tail)
            if not bool(active.any()) or step == params.max_new_tokens - 1:
                break
            logits, mask, positions = self._decode_step(cache, mask, positions, nxt, active)
        return self._finish(prompts, ovs, dec, cache, mask, reused)

    def _start(self, prompts: list[list[int]], ovs: list[EmbedOverride | None]):
        """``(cache, mask, last logits, reused prompt tokens per row)``: the kept cache extended when
        every prompt extends one of its rows, else a fresh prefill."""
        rows = self._match_prefix(prompts, ovs) if self.prefix_cache else None
        if rows is not None:
            return self._extend(prompts, rows)
        self._kv = None  # free the old cache before building a new one
        cache, mask, logits = self._prefill(prompts, ovs)
        return cache, mask, logits, [0] * len(prompts)

    def _decode_setup(self, params: SamplingParams) -> tuple[Any, torch.Tensor | None, int]:
        """``(torch generator or None, stop-token ids or None, output chars searched for stop strings)``."""
        dev = self.device
        gen = None
        if params.seed is not None:
            gen = torch.Generator(device=dev)
            gen.manual_seed(int(params.seed))
        stop_ids = set(params.stop_token_ids) | (set() if params.ignore_eos else set(self._eos))
        stop_tensor = torch.tensor(sorted(stop_ids), device=dev, dtype=torch.long)
        if params.stop and self.tokenizer is None:
            raise EngineError("stop strings need a tokenizer; pass one to HFEngine")
        tail = max((len(s) for s in params.stop), default=0) + 8
        return gen, (stop_tensor if len(stop_ids) else None), tail

    def _next_tokens(self, logits: torch.Tensor, params: SamplingParams, gen: torch.Generator | None,
                     stop_tensor: torch.Tensor | None, active: torch.Tensor):
        """``(next token, its log-prob, whether it is a stop token)`` per row, from the last logits."""
        logits = upcast(logits)
        logp = torch.log_softmax(logits, dim=-1)
        nxt = self._sample(logits, logp, params, gen)
        chosen_lp = logp.gather(-1, nxt[:, None])[:, 0]
        hit_stop = torch.isin(nxt, stop_tensor) if stop_tensor is not None else torch.zeros_like(active)
        return nxt, chosen_lp, hit_stop

    def _record(self, dec: _Decoded, nxt: torch.Tensor, chosen_lp: torch.Tensor, hit_stop: torch.Tensor,
                active: torch.Tensor, params: SamplingParams, tail: int) -> None:
        """Append this step's token to every active row; a row that stops (stop token, stop string or
        length) records why and leaves ``active``."""
        out_ids, out_lp, reason, matched = dec.ids, dec.logprobs, dec.reason, dec.matched
        nxt_l, lp_l, hit_l, act_l = nxt.tolist(), chosen_lp.tolist(), hit_stop.tolist(), active.tolist()
        for i in range(len(out_ids)):
            if not act_l[i]:
                continue
            out_ids[i].append(nxt_l[i])
            out_lp[i].append(lp_l[i])
            if hit_l[i]:
                reason[i], matched[i] = "stop", nxt_l[i]
            elif params.stop:
                text = self.tokenizer.decode(out_ids[i][-tail:], skip_special_tokens=False)
                for s in params.stop:
                    if s in text:
                        reason[i], matched[i] = "stop", s
                        break
            if reason[i] is None and len(out_ids[i]) >= params.max_new_tokens:
                reason[i] = "length"
            if reason[i] is not None:
                active[i] = False

    def _decode_step(self, cache: DynamicCache, mask: torch.Tensor, positions: torch.Tensor,
                     nxt: torch.Tensor, active: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Feed the sampled tokens through the cache: ``(next logits, mask, positions)``."""
        # Finished rows get a masked pad column so the batch stays rectangular.
        feed = torch.where(active, nxt, torch.full_like(nxt, self.pad_id))
        positions = positions + active.long()
        mask = torch.cat([mask, active[:, None].to(mask.dtype)], dim=1)
        out = self.model(input_ids=feed[:, None], attention_mask=mask, position_ids=positions[:, None],
                         use_cache=True, logits_to_keep=1, **{self._cache_kw: cache})
        return out.logits[:, -1], mask, positions

    def _finish(self, prompts: list[list[int]], ovs: list[EmbedOverride | None], dec: _Decoded,
                cache: DynamicCache, mask: torch.Tensor, reused: list[int]) -> list[GenerationOutput]:
        """Keep the cache for the next call (prefix reuse) and build the outputs."""
        if self.prefix_cache:
            # Cached columns hold every prompt token and every sampled token but the last one.
            kept = [p + o[:-1] for p, o in zip(prompts, dec.ids)]
            self._kv = _KVState(cache, mask, kept, ovs)
        else:
            self._kv = None
        results = []
        for i, ids in enumerate(dec.ids):
            text = self.tokenizer.decode(ids, skip_special_tokens=False) if self.tokenizer else None
            results.append(GenerationOutput(ids, dec.logprobs[i], dec.reason[i] or "length", dec.matched[i],
                                            text, prompt_len=len(prompts[i]), cached_prompt_tokens=reused[i]))
        return results

    def _sample(self, logits: torch.Tensor, logp: torch.Tensor, params: SamplingParams,
                gen: torch.Generator | None) -> torch.Tensor:
        if params.temperature == 0:
            return logits.argmax(dim=-1)
        logits = logits / params.temperature
        if 0 < params.top_k < logits.shape[-1]:
            kth = torch.topk(logits, params.top_k, dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if params.top_p < 1.0:
            sorted_logits, idx = torch.sort(logits, dim=-1, descending=True)
            probs = torch.softmax(sorted_logits, dim=-1)
            # Drop a token when the tokens before it already reach top_p (the first always stays).
            drop = (probs.cumsum(-1) - probs) >= params.top_p
            sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
            logits = torch.full_like(logits, float("-inf")).scatter(-1, idx, sorted_logits)
        probs = torch.softmax(logits, dim=-1)
        # Exponential race: argmax p_i / E_i with E_i ~ Exp(1) samples i with probability p_i.
        noise = torch.empty_like(probs).exponential_(1.0, generator=gen)
        return (probs / noise).argmax(dim=-1)

    def _embed(self, ids: torch.Tensor, rows: list[EmbedOverride | None], shift: list[int]) -> torch.Tensor:
        emb = self.model.get_input_embeddings()(ids)
        out = []
        for i, ov in enumerate(rows):
            if ov is None or not ov.positions:
                out.append(emb[i])
            else:
                out.append(inject(emb[i], [p + shift[i] for p in ov.positions], ov.embeds))
        return torch.stack(out, dim=0)

    def _prefill(self, prompts: list[list[int]], ovs: list[EmbedOverride | None]):
        dev = self.device
        width = max(len(p) for p in prompts)
        pads = [width - len(p) for p in prompts]
        ids = torch.tensor([[self.pad_id] * n + p for n, p in zip(pads, prompts)], device=dev)
        mask = torch.tensor([[0] * n + [1] * len(p) for n, p in zip(pads, prompts)], device=dev)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        try:
            cache = DynamicCache(config=self.model.config)
        except TypeError:  # older transformers
            cache = DynamicCache()
        kwargs: dict[str, Any] = dict(attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1,
                                      **{self._cache_kw: cache})
        if any(ov is not None for ov in ovs):
            out = self.model(inputs_embeds=self._embed(ids, ovs, pads), **kwargs)
        else:
            out = self.model(input_ids=ids, **kwargs)
        return cache, mask, out.logits[:, -1]

    def _match_prefix(self, prompts: list[list[int]], ovs: list[EmbedOverride | None]) -> list[int] | None:
        """Kept-cache row for each prompt when every prompt strictly extends a distinct row."""
        kv = self._kv
        if kv is None:
            return None
        used: set[int] = set()
        rows: list[int] = []
        cursor = 0
        for p, ov in zip(prompts, ovs):
            order = list(range(cursor, len(kv.tokens))) + list(range(cursor))  # rollouts keep order
            found = None
            for r in order:
                t = kv.tokens[r]
                if r not in used and len(t) < len(p) and p[:len(t)] == t and _same_override(ov, kv.overrides[r]):
                    found = r
                    break
            if found is None:
                return None
            used.add(found)
            rows.append(found)
            cursor = found + 1
        return rows

    def _extend(self, prompts: list[list[int]], rows: list[int]):
        """Prefill only the new tokens of each prompt on top of the kept cache rows."""
        kv = self._kv
        assert kv is not None
        dev = self.device
        cache = kv.cache
        if rows != list(range(len(kv.tokens))):
            cache.batch_select_indices(torch.tensor(rows, device=dev))
        mask = kv.mask[rows]
        # Columns no kept row uses any more (left padding, dropped rows) are trimmed away.
        used_cols = mask.any(dim=0).nonzero()
        first = int(used_cols[0]) if len(used_cols) else mask.shape[1]
        if first > 0 and _trim_left(cache, first):
            mask = mask[:, first:]
        news = [p[len(kv.tokens[r]):] for p, r in zip(prompts, rows)]
        width = max(len(n) for n in news)
        pads = [width - len(n) for n in news]
        ids = torch.tensor([[self.pad_id] * k + n for k, n in zip(pads, news)], device=dev)
        chunk_mask = torch.tensor([[0] * k + [1] * len(n) for k, n in zip(pads, news)], device=dev,
                                  dtype=mask.dtype)
        mask = torch.cat([mask, chunk_mask], dim=1)
        pos = (mask.long().cumsum(-1) - 1).clamp(min=0)[:, -width:]
        self._kv = None
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1,
                         **{self._cache_kw: cache})
        reused = [len(kv.tokens[r]) for r in rows]
        return cache, mask, out.logits[:, -1], reused

    # ---- scoring --------------------------------------------------------------------------
    @torch.no_grad()
    def score(self, sequences: Sequence[Sequence[int]], *, top_k: int = 20, start: int | Sequence[int] = 1,
              overrides: Sequence[EmbedOverride | None] | None = None) -> list[ScoreOutput]:
        seqs, ovs, st = score_args(sequences, top_k, start, overrides, self.vocab_size, self.hidden_size)
        lengths = [len(s) for s in seqs]
        was_training = self.model.training
        self.model.eval()
        try:
            results: list[ScoreOutput | None] = [None] * len(seqs)
            order = sorted(range(len(seqs)), key=lambda i: lengths[i])
            batch: list[int] = []
            for i in order:
                if batch and (len(batch) + 1) * lengths[i] > self.score_token_budget:
                    self._score_batch(seqs, ovs, st, top_k, batch, results)
                    batch = []
                batch.append(i)
            if batch:
                self._score_batch(seqs, ovs, st, top_k, batch, results)
            return results  # type: ignore[return-value]
        finally:
            self.model.train(was_training)

    def _score_batch(self, seqs, ovs, st, top_k, batch, results) -> None:
        dev = self.device
        width = max(len(seqs[i]) for i in batch)
        ids = torch.tensor([seqs[i] + [self.pad_id] * (width - len(seqs[i])) for i in batch], device=dev)
        mask = torch.tensor([[1] * len(seqs[i]) + [0] * (width - len(seqs[i])) for i in batch], device=dev)
        rows = [ovs[i] for i in batch]
        backbone = getattr(self.model, self.model.base_model_prefix)
        kwargs = dict(attention_mask=mask, use_cache=False)
        if any(ov is not None for ov in rows):
            hidden = backbone(inputs_embeds=self._embed(ids, rows, [0] * len(batch)), **kwargs).last_hidden_state
        else:
            hidden = backbone(input_ids=ids, **kwargs).last_hidden_state
        head = self.model.get_output_embeddings()
        for j, i in enumerate(batch):
            n = len(seqs[i])
            h = hidden[j, st[i] - 1:n - 1]  # hidden at t-1 predicts token t
            target = ids[j, st[i]:n]
            tok_lp, top_ids, top_lp = [], [], []
            for c in range(0, h.shape[0], self.logits_chunk):
                logp = torch.log_softmax(upcast(head(h[c:c + self.logits_chunk])), dim=-1)
                tok_lp.append(logp.gather(-1, target[c:c + self.logits_chunk, None])[:, 0])
                if top_k:
                    v, k = torch.topk(logp, top_k, dim=-1)
                    top_ids.append(k)
                    top_lp.append(v)
            m = h.shape[0]
            results[i] = ScoreOutput(
                start=st[i],
                token_logprobs=torch.cat(tok_lp).cpu() if tok_lp else torch.zeros(0),
                topk_ids=torch.cat(top_ids).cpu() if top_ids else torch.zeros(m, 0, dtype=torch.long),
                topk_logprobs=torch.cat(top_lp).cpu() if top_lp else torch.zeros(m, 0),
            )


def _trim_left(cache: DynamicCache, n: int) -> bool:
    """Drop the first ``n`` columns of every layer of ``cache`` in place; False if unsupported."""
    layers = getattr(cache, "layers", None)
    if not layers or not all(hasattr(layer, "keys") and hasattr(layer, "values") for layer in layers):
        return False
    if any(getattr(layer, "is_sliding", False) for layer in layers):
        return False
    for layer in layers:
        if layer.keys is None or layer.keys.dim() != 4:
            return False
    for layer in layers:
        layer.keys = layer.keys[:, :, n:].contiguous()
        layer.values = layer.values[:, :, n:].contiguous()
    return True


def _load_safetensors_dir(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    files = sorted(path.glob("*.safetensors")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise EngineError(f"no safetensors weights at {path}")
    state: dict[str, torch.Tensor] = {}
    for f in files:
        state.update(load_file(str(f)))
    return state
