"""The LOPD composer: frozen backbone + LoRA encoder + QFormer -> latent tokens for the teacher.

For each (task, retrieved experience) pair the encoder (the frozen backbone with a rank-8 LoRA)
reads ``"Task to solve:\\n{task}\\n\\nReference past trajectory:\\n" + experience`` and yields the
last-layer hidden states after the final norm, all of them (no pooling). The QFormer compresses
them to 32 latents; the top-3 experiences in retrieval order give 96 latent tokens, which
:mod:`lopd.latent` splices into the teacher's prompt.

The teacher IS the same frozen backbone, run with the adapter disabled
(:meth:`Composer.teacher_mode`), so the composer gets gradients only through the latents it
feeds the teacher. The LoRA is injected into the backbone in place: once a backbone is given to
a :class:`Composer`, run it only through the composer.

Example::

    composer = Composer(teacher_backbone, tokenizer)           # peft LoRA + QFormer
    latents = composer.encode(["Buy 2 apples."], [[exp1, exp2, exp3]])[0]   # [96, d]
    enc = encode_with_latents(tokenizer, prompt_text, n_latents=latents.shape[0])
    embeds = inject(composer.input_embeddings()(torch.tensor(enc.ids)), enc.positions, latents)
    with composer.teacher_mode() as teacher:                     # the backbone, adapter disabled
        logits = teacher(inputs_embeds=embeds[None]).logits      # grads reach the composer
    composer.set_anchor()        # after cold start: c_phi0 for the anchor term
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from lopd.checkpointing import is_checkpointed
from lopd.config import ComposerConfig, QFormerConfig
from lopd.losses import upcast

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float64": torch.float64}


# ------------------------------------------------------------------------------------ QFormer


class PerceiverAttention(nn.Module):
    """Latents attend to [inputs; latents]: separate LayerNorms, no biases, q and k each x dh^-0.25."""

    def __init__(self, d: int, n_heads: int):
        super().__init__()
        if d % n_heads:
            raise ValueError(f"width {d} is not divisible by {n_heads} heads")
        self.n_heads, self.head_dim = n_heads, d // n_heads
        self.norm_x = nn.LayerNorm(d)
        self.norm_lat = nn.LayerNorm(d)
        self.to_q = nn.Linear(d, d, bias=False)
        self.to_kv = nn.Linear(d, 2 * d, bias=False)
        self.to_out = nn.Linear(d, d, bias=False)

    def input_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of the inputs ``x`` [B, L, d]: ``to_kv(norm_x(x))`` split in two.

        They do not depend on the latents, so a block applied several times to the same inputs
        (the shared QFormer block) computes them once and passes them as ``x_kv``.
        """
        k, v = self.to_kv(self.norm_x(x)).chunk(2, dim=-1)
        return k, v

    def forward(
        self, x: Tensor, lat: Tensor, x_mask: Tensor | None = None, x_kv: tuple[Tensor, Tensor] | None = None
    ) -> Tensor:
        """``x`` [B, L, d], ``lat`` [B, M, d], ``x_mask`` [B, L] (true = real input) -> [B, M, d].

        ``x_kv``: :meth:`input_kv` of ``x``, when already computed (then ``x`` itself is not read).
        k, v of ``[x; lat]`` are those of x and of lat concatenated (the projection is row-wise).
        """
        k_x, v_x = x_kv if x_kv is not None else self.input_kv(x)
        b, n, _ = k_x.shape
        m = lat.shape[1]
        lat = self.norm_lat(lat)
        q = self.to_q(lat)
        k_l, v_l = self.to_kv(lat).chunk(2, dim=-1)
        k, v = torch.cat([k_x, k_l], dim=1), torch.cat([v_x, v_l], dim=1)
        q = q.view(b, m, self.n_heads, self.head_dim).transpose(1, 2)
        k = k.view(b, n + m, self.n_heads, self.head_dim).transpose(1, 2)
        v = v.view(b, n + m, self.n_heads, self.head_dim).transpose(1, 2)
        scale = self.head_dim**-0.25
        scores = upcast((q * scale) @ (k * scale).transpose(-2, -1))
        if x_mask is not None:
            keep = torch.cat([x_mask.bool(), x_mask.new_ones(b, m, dtype=torch.bool)], dim=1)
            scores = scores.masked_fill(~keep[:, None, None, :], torch.finfo(scores.dtype).min)
        attn = torch.softmax(scores, dim=-1).to(v.dtype)
        out = (attn @ v).transpose(1, 2).reshape(b, m, -1)
        return self.to_out(out)


def feed_forward(d: int, mult: int = 4) -> nn.Sequential:
    """LayerNorm, Linear(d, mult*d), GELU, Linear(mult*d, d); no biases."""
    return nn.Sequential(
        nn.LayerNorm(d), nn.Linear(d, mult * d, bias=False), nn.GELU(), nn.Linear(mult * d, d, bias=False)
    )


class QFormer(nn.Module):
    """Perceiver-resampler compressor: variable-length hidden states -> ``n_latents`` vectors.

    x = Linear(d, d)(H); lat = learned queries (randn / sqrt(d)); ``depth`` times with ONE shared
    block: lat = Attn(x, lat) + lat; lat = FF(lat) + lat; output LayerNorm(Linear(d, d)(lat)).

    >>> q = QFormer(d=16, n_heads=4, n_latents=3, depth=2)
    >>> q(torch.randn(2, 5, 16)).shape
    torch.Size([2, 3, 16])
    """

    def __init__(
        self,
        d: int,
        n_heads: int,
        n_latents: int = 32,
        depth: int = 8,
        ff_mult: int = 4,
        share_layers: bool = True,
    ):
        super().__init__()
        if n_latents < 1 or depth < 1:
            raise ValueError(f"n_latents and depth must be >= 1, got {n_latents}, {depth}")
        self.d, self.n_latents, self.depth = d, n_latents, depth
        self.queries = nn.Parameter(torch.randn(n_latents, d) / math.sqrt(d))
        self.proj_in = nn.Linear(d, d)
        n_blocks = 1 if share_layers else depth
        self.attn = nn.ModuleList(PerceiverAttention(d, n_heads) for _ in range(n_blocks))
        self.ff = nn.ModuleList(feed_forward(d, ff_mult) for _ in range(n_blocks))
        self.proj_out = nn.Linear(d, d)
        self.norm_out = nn.LayerNorm(d)

    compute_dtype: torch.dtype | None = None
    """Dtype the forward runs in when it differs from the parameters' (a float32 master copy run in
    bfloat16); None = the parameters' dtype."""

    @classmethod
    def from_config(cls, d: int, backbone_heads: int, cfg: QFormerConfig) -> QFormer:
        q = cls(d, cfg.n_heads or backbone_heads, cfg.n_latents, cfg.depth, cfg.ff_mult, cfg.share_layers)
        if cfg.dtype == "bfloat16" and cfg.master_weights:
            q.compute_dtype = torch.bfloat16
            return q  # float32 parameters: the master copy
        return q.to(_DTYPES[cfg.dtype])

    def forward(self, h: Tensor, mask: Tensor | None = None, *, cast: bool = True) -> Tensor:
        """``h`` [B, L, d] hidden states, ``mask`` [B, L] true at real tokens -> [B, n_latents, d]."""
        if cast and self.compute_dtype not in (None, self.queries.dtype):
            # the same forward over weights cast to the compute dtype: gradients reach the master copy
            params = {n: p.to(self.compute_dtype) for n, p in self.named_parameters()}
            return torch.func.functional_call(self, params, (h, mask), {"cast": False})
        x = self.proj_in(h.to(self.queries.dtype))
        lat = self.queries.unsqueeze(0).expand(h.shape[0], -1, -1)
        # One shared block reads the same inputs every pass: their keys/values are computed once
        # (the same numbers, and 1/depth of the input-side projection work forward and backward).
        shared_kv = self.attn[0].input_kv(x) if len(self.attn) == 1 else None
        for i in range(self.depth):
            j = 0 if len(self.attn) == 1 else i
            lat = self.attn[j](x, lat, mask, x_kv=shared_kv) + lat
            lat = self.ff[j](lat) + lat
        return self.norm_out(self.proj_out(lat))


# ------------------------------------------------------------------------------------ Composer


def encode_text(tokenizer: Any, text: str) -> list[int]:
    """Token ids of ``text`` without special tokens (transformers tokenizer or ``tokenizers.Tokenizer``)."""
    out = tokenizer.encode(text, add_special_tokens=False)
    return list(out.ids if hasattr(out, "ids") else out)


def _mangle(name: str) -> str:
    return name.replace(".", "__")


class Composer(nn.Module):
    """Frozen backbone + peft LoRA encoder + QFormer; also serves the frozen teacher forward.

    ``backbone`` is a transformers causal LM (e.g. ``Qwen3ForCausalLM``): the frozen initial
    model, which is also the teacher. Trainable parameters: the LoRA and the QFormer.
    ``tokenizer`` is only needed for :meth:`encode` (text); :meth:`forward` takes token ids.
    """

    def __init__(self, backbone: nn.Module, tokenizer: Any = None, cfg: ComposerConfig | None = None):
        super().__init__()
        from peft import LoraConfig, get_peft_model

        self.cfg = cfg or ComposerConfig()
        self.tokenizer = tokenizer
        backbone.requires_grad_(False)
        backbone.eval()
        lc = self.cfg.lora
        # peft reads transformers' deprecated `is_gradient_checkpointing`: its FutureWarning is not ours to fix
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
            self.peft = get_peft_model(
                backbone,
                LoraConfig(
                    r=lc.r,
                    lora_alpha=lc.alpha,
                    lora_dropout=lc.dropout,
                    target_modules=list(lc.target_modules),
                    bias="none",
                ),
                adapter_name=lc.adapter_name,
            )
        conf = backbone.config
        self.qformer = QFormer.from_config(conf.hidden_size, conf.num_attention_heads, self.cfg.qformer)
        self.qformer.to(next(backbone.parameters()).device)
        self._anchor = nn.Module()  # c_phi0's parameters, as buffers (moved with .to(), never trained)
        self._anchor_cache: OrderedDict[tuple[str, str], Tensor] = OrderedDict()  # on the CPU, LRU
        self.set_anchor()

    # -- parameters and state
    @property
    def backbone(self) -> nn.Module:
        """The causal LM (with LoRA layers inside; use :meth:`teacher_mode` for the plain model)."""
        return self.peft.get_base_model()

    @property
    def n_latents(self) -> int:
        """Latents per experience."""
        return self.qformer.n_latents

    def named_trainable_parameters(self) -> Iterator[tuple[str, nn.Parameter]]:
        """The LoRA's and the QFormer's parameters (whether or not they currently require grad)."""
        tag = f".{self.cfg.lora.adapter_name}."
        for name, p in self.named_parameters():
            if name.startswith("qformer.") or ("lora_" in name and tag in name):
                yield name, p

    def trainable_parameters(self) -> list[nn.Parameter]:
        return [p for _, p in self.named_trainable_parameters()]

    def parameter_groups(self) -> dict[str, list[nn.Parameter]]:
        """``{"lora": [...], "qformer": [...]}`` for per-group optimisers or clipping."""
        groups: dict[str, list[nn.Parameter]] = {"lora": [], "qformer": []}
        for name, p in self.named_trainable_parameters():
            groups["qformer" if name.startswith("qformer.") else "lora"].append(p)
        return groups

    def set_trainable(self, flag: bool) -> None:
        """Freeze (false: the frozen-composer ablation) or unfreeze the LoRA and QFormer."""
        for p in self.trainable_parameters():
            p.requires_grad_(flag)

    @torch.no_grad()
    def set_anchor(self) -> None:
        """Snapshot the trainable parameters as the anchor composer (c_phi0); call after cold start."""
        for name, p in self.named_trainable_parameters():
            self._anchor.register_buffer(_mangle(name), p.detach().clone(), persistent=False)
        self._anchor_cache.clear()

    @torch.no_grad()
    def moved_from_anchor(self) -> dict[str, float]:
        """How far the LoRA and the QFormer each are from the anchor (c_phi0's weights): the norm of the
        difference over the anchor's norm, per group (0 at the anchor)."""
        sums: dict[str, list[float]] = {"lora": [0.0, 0.0], "qformer": [0.0, 0.0]}
        for name, p in self.named_trainable_parameters():
            a = getattr(self._anchor, _mangle(name)).double()
            s = sums["qformer" if name.startswith("qformer.") else "lora"]
            s[0] += float((p.double() - a).pow(2).sum())
            s[1] += float(a.pow(2).sum())
        return {k: math.sqrt(d) / max(math.sqrt(n), 1e-12) for k, (d, n) in sums.items()}

    def _apply(self, fn, recurse=True):  # .to()/.cuda(): cached anchors would sit on the old device
        self._anchor_cache.clear()
        return super()._apply(fn, recurse)

    def trainable_state_dict(self) -> dict[str, dict[str, Tensor]]:
        """Checkpoint state: ``{"trainable": {...}, "anchor": {...}}`` (no backbone weights)."""
        return {
            "trainable": {n: p.detach().clone() for n, p in self.named_trainable_parameters()},
            "anchor": {
                n: getattr(self._anchor, _mangle(n)).clone() for n, _ in self.named_trainable_parameters()
            },
        }

    @torch.no_grad()
    def load_trainable_state_dict(self, state: dict[str, dict[str, Tensor]]) -> None:
        """Inverse of :meth:`trainable_state_dict`; names and shapes must match exactly."""
        named = dict(self.named_trainable_parameters())
        for part in ("trainable", "anchor"):  # validate everything before copying anything
            got = state.get(part) if isinstance(state, dict) else None
            if not isinstance(got, dict) or set(got) != set(named):
                raise ValueError(f"composer state {part!r} does not match this composer's parameters")
            for n, p in named.items():
                if tuple(got[n].shape) != tuple(p.shape):
                    raise ValueError(
                        f"composer state {part}.{n}: shape {tuple(got[n].shape)} != {tuple(p.shape)}"
                    )
        for n, p in named.items():
            p.copy_(state["trainable"][n])
            getattr(self._anchor, _mangle(n)).copy_(state["anchor"][n])
        self._anchor_cache.clear()

    # -- encoder
    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """One experience per row: ``input_ids`` [B, L] -> latents [B, n_latents, d].

        Hidden states are the backbone's last layer after its final norm, LoRA enabled.
        ``attention_mask`` None: every row is all real tokens (no padding), which lets the
        attention take its plain causal path.
        """
        hidden = self.backbone.get_decoder()(
            input_ids=input_ids, attention_mask=attention_mask, use_cache=False
        ).last_hidden_state
        mask = None if attention_mask is None else attention_mask.bool()
        if self.checkpoint_qformer and torch.is_grad_enabled():
            # the whole QFormer as one unit: its bf16 cast (functional_call) is recomputed with it
            return checkpoint(self.qformer, hidden, mask, use_reentrant=False)
        return self.qformer(hidden, mask)

    @property
    def checkpoint_qformer(self) -> bool:
        """Whether the QFormer recomputes in the backward: when the backbone's layers do
        (``model.gradient_checkpointing``)."""
        return is_checkpointed(self.backbone.get_decoder().layers[0])

    def encoder_ids(self, task: str, experience: str) -> list[int]:
        """Token ids the encoder reads for one pair: task prefix (tokenised alone) + experience."""
        if self.tokenizer is None:
            raise ValueError("Composer.encode needs a tokenizer; pass one or call the composer on ids")
        ids = (
            encode_text(self.tokenizer, self.cfg.task_prefix.replace("{task}", task))
            if self.cfg.task_conditional
            else []
        )
        ids += encode_text(self.tokenizer, experience)
        if not ids:
            raise ValueError("an empty encoder input (empty task prefix and experience)")
        limit = self.cfg.max_encoder_tokens
        return ids[:limit] if limit else ids

    def _encode_ids(self, seqs: list[list[int]], anchor: bool) -> list[Tensor]:
        """Latents per id sequence, in order. Rows go through in batches of ``encode_batch_size``
        after sorting by length (longest first), so a batch's rows are close in length and little
        padding is computed; a batch without padding runs unmasked (the causal fast path)."""
        device = next(self.backbone.parameters()).device
        out: list[Tensor | None] = [None] * len(seqs)
        step = max(1, self.cfg.encode_batch_size)
        order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
        for i in range(0, len(order), step):
            rows = order[i : i + step]
            width = max(len(seqs[r]) for r in rows)
            ids = torch.zeros(len(rows), width, dtype=torch.long, device=device)
            mask = torch.zeros(len(rows), width, dtype=torch.long, device=device)
            for j, r in enumerate(rows):
                ids[j, : len(seqs[r])] = torch.tensor(seqs[r], dtype=torch.long)
                mask[j, : len(seqs[r])] = 1
            padded = mask if any(len(seqs[r]) < width for r in rows) else None
            if anchor:
                with torch.no_grad():
                    params = {
                        n: getattr(self._anchor, _mangle(n)) for n, _ in self.named_trainable_parameters()
                    }
                    lat = torch.func.functional_call(self, params, (ids, padded), strict=False)
            else:
                lat = self(ids, padded)
            for r, x in zip(rows, lat.unbind(0)):
                out[r] = x
        return out  # type: ignore[return-value]

    def encode(
        self, tasks: Sequence[str], experiences: Sequence[Sequence[str]], *, anchor: bool = False
    ) -> list[Tensor]:
        """Latent context per task: ``[len(experiences[i]) * n_latents, d]``, in retrieval order.

        ``anchor=True`` gives c_phi0 (the snapshot from :meth:`set_anchor`, without gradients).
        A task with no experience gets a ``[0, d]`` tensor.
        """
        if len(tasks) != len(experiences):
            raise ValueError(f"{len(tasks)} tasks but {len(experiences)} experience lists")
        pairs = [
            (t if self.cfg.task_conditional else "", e) for t, exps in zip(tasks, experiences) for e in exps
        ]
        if anchor:
            flat = self._anchor_latents(pairs)
        else:
            flat = self._encode_ids([self.encoder_ids(t, e) for t, e in pairs], False) if pairs else []
        out, k = [], 0
        d = self.qformer.d
        for exps in experiences:
            n = len(exps)
            out.append(torch.cat(flat[k : k + n], dim=0) if n else self.qformer.queries.new_zeros(0, d))
            k += n
        return out

    def _anchor_latents(self, pairs: list[tuple[str, str]]) -> list[Tensor]:
        """c_phi0 per (task, experience) pair; cached, as c_phi0 is fixed after cold start."""
        cache, limit = self._anchor_cache, self.cfg.anchor_cache_entries
        missing = list(dict.fromkeys(p for p in pairs if p not in cache))
        fresh = (
            dict(zip(missing, self._encode_ids([self.encoder_ids(t, e) for t, e in missing], True)))
            if missing
            else {}
        )
        device = self.qformer.queries.device
        out = [fresh[p] if p in fresh else cache[p].to(device) for p in pairs]
        if limit > 0:
            cache.update((p, lat.detach().cpu()) for p, lat in fresh.items())
            for p in pairs:
                cache.move_to_end(p)
            while len(cache) > limit:
                cache.popitem(last=False)  # least recently used
        return out

    def anchor_cache_state(self) -> list[tuple[str, str, Tensor]]:
        """The cached anchor latents, least recently used first (a checkpoint keeps them, so a
        resumed run reads the very same c_phi0)."""
        return [(t, e, lat) for (t, e), lat in self._anchor_cache.items()]

    def load_anchor_cache_state(self, items: Sequence[tuple[str, str, Tensor]]) -> None:
        """Inverse of :meth:`anchor_cache_state`; call after the anchor is loaded."""
        self._anchor_cache = OrderedDict(((t, e), lat) for t, e, lat in items)

    # -- teacher
    @contextlib.contextmanager
    def teacher_mode(self) -> Iterator[nn.Module]:
        """Context in which :attr:`backbone` is the plain frozen model (the adapter bypassed).

        Keeps the LoRA's requires_grad flags as they were (peft's own context re-enables them).
        """
        lora = [p for n, p in self.peft.named_parameters() if "lora_" in n]
        flags = [p.requires_grad for p in lora]
        try:
            with self.peft.disable_adapter():
                yield self.backbone
        finally:
            for p, f in zip(lora, flags):
                p.requires_grad_(f)

    def input_embeddings(self) -> nn.Module:
        """The backbone's token embedding (no adapter on it), for :func:`lopd.latent.inject`."""
        return self.backbone.get_input_embeddings()
