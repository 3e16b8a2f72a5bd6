"""Peak memory of one learner step, from arithmetic about what this code keeps (issue #35).

Every term counts tensors the trainer and the learners hold (``harness/training/trainer.py``,
``harness/learners/*.py``, ``lopd/chunked.py``, ``lopd/checkpointing.py``); nothing is fitted to a
measurement. The activation terms are the tensors autograd saves in transformers' Qwen3 layer, counted
once with ``saved_tensors_hooks`` (tests/harness/training/test_memory_model.py checks them exactly)::

    from harness.config import load_config
    from harness.models.shapes import QWEN3_CONFIGS
    from harness.training.memory_model import predict_peak, fit_micro_batch_tokens
    from harness.training.train_config import TrainConfig
    cfg = load_config(TrainConfig, None, ["learner=grpo", "model.dtype=bfloat16", "model.device=cuda"])
    est = predict_peak(cfg, QWEN3_CONFIGS["Qwen/Qwen3-4B"], tokens=4096, device="cuda")
    print(est.table())               # named parts in bytes, est.total the peak
    fit_micro_batch_tokens(cfg, QWEN3_CONFIGS["Qwen/Qwen3-4B"], 80e9)   # the largest T that fits

``hf_config``: a config.json dict, a transformers config, or a path to config.json or its folder.
Not counted: the CUDA context and allocator slack (a few GB), the Python process itself, rollouts and
the bank; on CUDA the CPU-held initial weights are shown in ``host``, outside ``total``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8}
LEARNERS = ("grpo", "sdpo", "opsd", "lopd", "sft")  # sft keeps what GRPO without a reference does
_LORA_IN = {"q_proj": "d", "k_proj": "d", "v_proj": "d", "o_proj": "q", "gate_proj": "d", "up_proj": "d",
            "down_proj": "i"}  # each LoRA target's input width: hidden, heads x head_dim, intermediate


@dataclass(frozen=True)
class ModelShape:
    """The architecture fields of a Qwen3 config.json that memory depends on."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    attention_bias: bool = False

    @classmethod
    def from_hf(cls, conf: Any) -> ModelShape:
        if isinstance(conf, (str, Path)):
            p = Path(conf)
            conf = json.loads((p / "config.json" if p.is_dir() else p).read_text())
        get = conf.get if isinstance(conf, dict) else lambda k, default=None: getattr(conf, k, default)
        d, h = int(get("hidden_size")), int(get("num_attention_heads"))
        return cls(d, int(get("num_hidden_layers")), h, int(get("num_key_value_heads") or h),
                   int(get("head_dim") or d // h), int(get("intermediate_size")), int(get("vocab_size")),
                   bool(get("tie_word_embeddings", True)), bool(get("attention_bias", False)))

    @property
    def q_width(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_dim

    def layer_params(self) -> int:
        d, q, kv = self.hidden, self.q_width, self.kv_width
        bias = q + 2 * kv + d if self.attention_bias else 0
        return 2 * d * q + 2 * d * kv + 3 * d * self.intermediate + 2 * self.head_dim + 2 * d + bias

    def params(self) -> int:
        """Distinct parameters (a tied head counted once), as ``sum(p.numel())`` of the HF model."""
        head = 0 if self.tied else self.vocab * self.hidden
        return self.layers * self.layer_params() + self.vocab * self.hidden + self.hidden + head


def shape_of(hf_config: Any) -> ModelShape:
    return hf_config if isinstance(hf_config, ModelShape) else ModelShape.from_hf(hf_config)


# ---- activations a token keeps, per decoder layer (bytes) -------------------------------------

def layer_activation_bytes(s: ModelShape, wb: int, trained: bool, mask_keys: int = 0) -> int:
    """Bytes autograd saves per token in one Qwen3 decoder layer with ``wb``-byte weights.

    ``trained``: the layer's weights get gradients (else only its input does: the frozen teacher).
    ``mask_keys``: key positions of an explicit attention mask (padding, or a KV-cache prefix); 0 when
    SDPA runs causal without one. RMSNorm upcasts to fp32, so its input and 1/rms are 4-byte."""
    d, q, kv, h = s.hidden, s.q_width, s.kv_width, s.heads
    grad_w = 1 if trained else 0  # a trained Linear also saves its input; a trained norm its normed value
    norms = 2 * (4 * d + 4 + grad_w * 2 * wb * d)
    qk_norms = 4 * (q + kv) + 4 * (h + s.kv_heads) + grad_w * wb * (q + kv)
    attn = wb * (2 * q + 2 * kv) + 4 * h  # rotated q and k, v, the output (o_proj's input is its view), lse
    if mask_keys:  # with a mask HF repeats k, v to every head, and SDPA keeps the mask in the query dtype
        attn += 2 * wb * (q - kv) + wb * mask_keys
    mlp = (3 + grad_w) * wb * s.intermediate  # gate, silu(gate), up; a trained down_proj keeps their product
    return norms + qk_norms + attn + mlp


def lora_extra_bytes(s: ModelShape, wb: int, r: int, targets: list[str]) -> int:
    """What a fp32 LoRA (peft upcasts adapters) adds per token and layer to a frozen layer: each
    lora_A's input (its own fp32 copy when the base is not fp32) and lora_A's output (r floats)."""
    width = {"d": s.hidden, "q": s.q_width, "i": s.intermediate}
    if wb != 4:
        return sum(4 * width[_LORA_IN[t]] + 4 * r for t in targets)
    shared = {"q_proj": "ln1", "k_proj": "ln1", "v_proj": "ln1", "gate_proj": "ln2", "up_proj": "ln2",
              "down_proj": "down"}  # fp32: the inputs are the layer's own tensors, shared (o_proj's already kept)
    new = {shared[t]: width[_LORA_IN[t]] for t in targets if t in shared}
    return sum(4 * w for w in new.values()) + 4 * r * len(targets)


def stack_activation_bytes(s: ModelShape, wb: int, tokens: int, trained: bool, checkpointing: bool,
                           mask_keys: int = 0, per_layer_extra: int = 0) -> int:
    """Saved activations of the decoder over ``tokens``, all layers, up to the final norm's output.
    Checkpointed layers keep only their input [tokens, d]."""
    layer = wb * s.hidden if checkpointing else layer_activation_bytes(s, wb, trained, mask_keys) + per_layer_extra
    final_norm = 4 * s.hidden + 4 + (wb * s.hidden if trained else 0)  # its output: the head's gathered input
    rope = 2 * wb * s.head_dim  # cos and sin, shared by the layers
    return tokens * (s.layers * layer + final_norm + rope)


def qformer_activation_bytes(s: ModelShape, q: Any, enc_tokens: int, pairs: int, qb: int, wb: int) -> int:
    """The QFormer's saved tensors over ``pairs`` encoded experiences of ``enc_tokens`` each: the
    input side once, then per pass the keys and values of [inputs; latents], the attention
    probabilities, and the latent side (norms, projections, the 4x feed-forward)."""
    d, m, n, h = s.hidden, q.n_latents, enc_tokens, q.n_heads or s.heads
    inputs = n * (qb * d * 3 + 8)
    per_pass = 2 * qb * d * (n + m) + (4 + (qb if qb != 4 else 0)) * h * m * (n + m)
    per_pass += qb * m * d * (6 + 2 * q.ff_mult)
    return pairs * (inputs + q.depth * per_pass + 2 * qb * m * d)


# ---- the estimate ----------------------------------------------------------------------------

@dataclass
class MemoryEstimate:
    """Named parts of the step's peak (bytes). ``static`` parts are held between steps; ``step`` parts
    are the peak the step adds above them (the largest of its phases, ``phase`` names which)."""

    static: dict[str, float] = field(default_factory=dict)
    step: dict[str, float] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    host: dict[str, float] = field(default_factory=dict)
    tokens: int = 0
    device: str = "cuda"

    @property
    def static_total(self) -> float:
        return sum(self.static.values())

    @property
    def step_total(self) -> float:
        return max(self.phases.values()) if self.phases else 0.0

    @property
    def phase(self) -> str:
        return max(self.phases, key=self.phases.get) if self.phases else ""

    @property
    def total(self) -> float:
        return self.static_total + self.step_total

    def table(self) -> str:
        rows = [f"memory model: T = {self.tokens} tokens, device {self.device} (GB = 1e9 bytes)"]
        rows += [f"  static  {k:28s} {v / 1e9:9.3f}" for k, v in self.static.items()]
        rows += [f"  step    {k:28s} {v / 1e9:9.3f}" for k, v in self.step.items()]
        rows += [f"  phase   {k:28s} {v / 1e9:9.3f}{'  <- peak' if k == self.phase else ''}"
                 for k, v in self.phases.items()]
        rows += [f"  host    {k:28s} {v / 1e9:9.3f}  (not in total)" for k, v in self.host.items()]
        rows.append(f"  total   {'static + peak phase':28s} {self.total / 1e9:9.3f}")
        return "\n".join(rows)


def _head_transient(s: ModelShape, wb: int, positions: int, chunk: int) -> int:
    """One LM-head chunk's backward, at its log-softmax: the recomputed logits in the loss dtype (fp32,
    kept by logsumexp) and three [c, V] gradients (logsumexp's, the gather's, their sum). By the head's
    matrix product the logits are gone: :func:`_head_matmul` is that moment."""
    c = positions if chunk <= 0 else min(chunk, positions)
    return 4 * max(4, wb) * c * s.vocab


def _head_matmul(s: ModelShape, wb: int, positions: int, chunk: int, later: bool) -> int:
    """The head's matrix product in a chunk's backward: the logits' gradient (loss dtype, and cast to
    ``wb``) and the new [V, d] weight gradient, beside the accumulated one for every chunk after the first."""
    c = positions if chunk <= 0 else min(chunk, positions)
    return (max(4, wb) + wb) * c * s.vocab + s.vocab * s.hidden * wb * (2 if later else 1)


def _checked(cfg: Any, tokens: int | None, device: str) -> tuple[str, int, int]:
    learner = str(cfg.learner)
    if learner not in LEARNERS:
        raise ValueError(f"memory model: unknown learner {learner!r} (knows {', '.join(LEARNERS)})")
    if device not in ("cuda", "cpu"):
        raise ValueError(f"memory model: device must be 'cuda' or 'cpu', not {device!r}")
    t = int(cfg.micro_batch_tokens if tokens is None else tokens)
    if t < 1:
        raise ValueError(f"memory model: tokens must be >= 1, got {t}")
    if cfg.model.dtype not in _DTYPE_BYTES:
        raise ValueError(f"memory model: unknown dtype {cfg.model.dtype!r}")
    return learner, t, _DTYPE_BYTES[cfg.model.dtype]


def _composer(cfg: Any, s: ModelShape) -> tuple[int, int, int]:
    """(LoRA parameters, QFormer parameters, bytes per QFormer parameter) of ``cfg.lopd``."""
    c = cfg.lopd.composer
    width = {"d": s.hidden, "q": s.q_width, "i": s.intermediate}
    outs = {"q_proj": s.q_width, "k_proj": s.kv_width, "v_proj": s.kv_width, "gate_proj": s.intermediate,
            "up_proj": s.intermediate, "o_proj": s.hidden, "down_proj": s.hidden}
    lora = s.layers * sum(c.lora.r * (width[_LORA_IN[t]] + outs[t]) for t in c.lora.target_modules)
    q, d = c.qformer, s.hidden
    block = 4 * d + 4 * d * d + 2 * d + (2 * q.ff_mult * d * d)  # norms, q/kv/out, ff (LayerNorm + 2 linears)
    qf = q.n_latents * d + d * d + d + (1 if q.share_layers else q.depth) * block + d * d + d + 2 * d
    qb = 4 if q.dtype == "float32" or (q.dtype == "bfloat16" and q.master_weights) else _DTYPE_BYTES[q.dtype]
    return lora, qf, qb


def _static_parts(cfg: Any, learner: str, s: ModelShape, wb: int, t: int, device: str) -> MemoryEstimate:
    """What is held between steps: the student, AdamW's states, the copies the trainer and learner make."""
    p = s.params()
    est = MemoryEstimate(tokens=t, device=device)
    est.static["weights"] = p * wb
    est.static["adamw_states"] = 2 * p * wb  # exp_avg, exp_avg_sq in the parameter's dtype
    # trainer.initial_state: a CPU copy of every state-dict entry (a tied head's entry copied twice)
    initial = (p + (s.vocab * s.hidden if s.tied else 0)) * wb
    (est.static if device == "cpu" else est.host)["initial_weights"] = initial
    if learner in ("sdpo", "opsd", "lopd") or (learner == "grpo" and cfg.grpo.kl_coef):
        est.static["frozen_teacher"] = p * wb  # ctx.frozen_copy(): the initial model on the device
    return est


def predict_peak(cfg: Any, hf_config: Any, tokens: int | None = None, device: str = "cuda", *,
                 supervised: int | None = None, encoder_tokens: int | None = None,
                 tasks_per_micro_batch: int = 1, row_tokens: int | None = None, padded: bool = False,
                 teacher_prefix: int = 0, first_step: bool = False) -> MemoryEstimate:
    """The peak memory of one step of ``cfg`` (a TrainConfig) on the model ``hf_config`` describes.

    ``tokens``: padded tokens of a micro-batch (default ``cfg.micro_batch_tokens``); ``supervised``:
    its positions the LM head runs on (default all); LOPD's ``encoder_tokens`` per experience (default
    ``lopd.composer.max_encoder_tokens``, else ``tokens``) for ``tasks_per_micro_batch`` tasks.
    ``row_tokens``: the width of the micro-batch's rows (default: one row of ``tokens``); ``padded``: rows
    of unequal length (an explicit attention mask instead of SDPA's causal path); ``teacher_prefix``: LOPD's
    teacher-row tokens before the first latent (run without a graph, as a KV cache, unless checkpointing).
    ``first_step``: the run's first step, inside which AdamW makes its states (they join the optimizer
    phase instead of the static part)."""
    learner, t, wb = _checked(cfg, tokens, device)
    s = shape_of(hf_config)
    n = t if supervised is None else int(supervised)
    if not 0 <= n <= t:
        raise ValueError(f"memory model: supervised={n} must lie in [0, tokens={t}]")
    ckpt, chunk = bool(cfg.model.gradient_checkpointing), int(cfg.model.logits_chunk)
    p = s.params()
    est = _static_parts(cfg, learner, s, wb, t, device)
    grads, vd = p * wb, s.vocab * s.hidden * wb
    est.step["gradients"] = grads
    row = min(int(row_tokens or t), t)
    mask = row if padded else 0
    acts = stack_activation_bytes(s, wb, t, True, ckpt, mask) + n * s.hidden * wb  # + the head's gathered input
    est.step["student_activations"] = acts
    head = _head_transient(s, wb, n, chunk)
    if learner in ("sdpo", "opsd") and getattr(cfg, learner).distill.full_vocab:
        head += 2 * 4 * min(chunk or n, n) * s.vocab  # the teacher's chunk logits and log-softmax beside
    est.step["head_chunk"] = head
    n_chunks = 1 if chunk <= 0 or n <= chunk else -(-n // chunk)
    later = n_chunks > 1  # a chunk after the first finds the head's gradient already there
    head_peak = max(head + (vd if later else 0), _head_matmul(s, wb, n, chunk, later))
    extra = 0.0
    if learner == "lopd":
        extra = _lopd_parts(cfg, s, wb, (t, row, teacher_prefix), n, ckpt, encoder_tokens or t,
                            tasks_per_micro_batch, mask, est)
    comp_g = est.step.get("composer_gradients", 0.0)
    est.phases["student_backward_head"] = acts + head_peak + comp_g
    if learner == "lopd":
        # the teacher's chunk (lopd.chunked.topk_and_targets) has two logsumexps and a top-k: two more
        # [c, V] gradients than the student's one log-softmax
        t_head = head + 2 * max(4, wb) * min(chunk or n, n) * s.vocab
        est.phases["composer_backward"] = acts + extra + t_head + comp_g
    _layer_phases(est, s, wb, t, ckpt, mask, acts, comp_g)
    if learner == "lopd" and cfg.lopd.train_composer and cfg.lopd.teacher_graph == "after_student":
        _teacher_after_student(est, grads, extra, t_head, comp_g)
    # AdamW: foreach on CUDA makes one sqrt(exp_avg_sq) of every parameter; per tensor on the CPU (two
    # temporaries of the largest, the embedding)
    est.phases["optimizer"] = grads + (p * wb if device == "cuda" else 2 * vd)
    if first_step:
        made = est.static.pop("adamw_states") + est.static.pop("composer_adamw", 0.0)
        est.step["adamw_states"] = made
        est.phases["optimizer"] += made
    return est


def _layer_phases(est: MemoryEstimate, s: ModelShape, wb: int, t: int, ckpt: bool, mask: int, acts: float,
                  comp_g: float) -> None:
    """The student's backward through its layers. Layer by layer the activations go and the gradients
    come, so it peaks at its top layer or its bottom one; a checkpointed layer is rebuilt first (one
    layer's activations beside the kept inputs)."""
    layer_act = t * layer_activation_bytes(s, wb, True, mask)
    # a layer's backward: its weights' gradients and the [T, I] / [T, d] gradients of its activations
    # (grad of down_proj's input, of silu(gate) and of up, then gate's; the residual stream's two)
    w_grad = s.layer_params() * wb
    layer_bwd = w_grad + t * wb * (3 * s.intermediate + 2 * s.hidden)
    vd, grads = s.vocab * s.hidden * wb, s.params() * wb
    kept = wb * s.hidden * t if ckpt else layer_act
    rebuilt = layer_act if ckpt else 0
    below = acts - (s.layers - 1) * kept  # the bottom layer's activations and what is outside the layers
    est.phases["backward_top_layer"] = acts + rebuilt + vd + layer_bwd + comp_g
    no_embedding = grads - (0 if s.tied else vd)  # an untied embedding's gradient comes last
    est.phases["backward_bottom_layer"] = below + rebuilt + no_embedding + layer_bwd - w_grad + comp_g
    # the embedding's backward: every gradient, and for a tied head a dense [V, d] one before it is added in
    est.phases["backward_end"] = grads + (vd if s.tied else 0) + comp_g


def _teacher_after_student(est: MemoryEstimate, grads: float, graphs: float, t_head: float, comp_g: float) -> None:
    """``lopd.teacher_graph=after_student``: the encoder's and QFormer's graphs wait through the student's
    backward, where the composer has no gradients yet; the teacher's graph is built after it, beside the
    student's gradients but not its activations."""
    encoders = est.step["encoder_activations"] + est.step["qformer_activations"]
    for name in ("student_backward_head", "backward_top_layer", "backward_bottom_layer", "backward_end"):
        est.phases[name] += encoders - comp_g
    est.phases["composer_backward"] = grads + graphs + t_head + comp_g


def _lopd_parts(cfg: Any, s: ModelShape, wb: int, rows: tuple[int, int, int], n: int, ckpt: bool, enc: int,
                tasks: int, row_mask: int, est: MemoryEstimate) -> float:
    """LOPD's composer (static) and the teacher's and encoder's graphs alive until the composer's
    backward (returned)."""
    lc = cfg.lopd
    lora, qf, qb = _composer(cfg, s)
    est.static["composer_params"] = 4 * lora + qb * qf
    est.static["composer_anchor"] = 4 * lora + qb * qf  # set_anchor(): c_phi0, a copy of the trainables
    est.static["composer_adamw"] = 2 * (4 * lora + qb * qf)
    est.step["composer_gradients"] = 4 * lora + qb * qf
    if not lc.train_composer:
        return 0.0
    latents = lc.n_retrieved * lc.composer.qformer.n_latents
    enc = min(enc, lc.composer.max_encoder_tokens or enc)
    t, row, prefix = rows
    keys = row + latents  # a teacher row: the student's row with the latents framed in
    prefix = 0 if ckpt else min(prefix, row)  # checkpointed layers take the whole row (no prefix cache)
    t_teach = (t // row) * (keys - prefix)  # tokens with a graph, every row of the micro-batch
    mask = row_mask if ckpt else keys  # behind a KV cache the attention takes an explicit mask over the row
    teach = stack_activation_bytes(s, wb, t_teach, False, ckpt, mask) + n * s.hidden * wb
    pairs = tasks * lc.n_retrieved
    lora_tok = lora_extra_bytes(s, wb, lc.composer.lora.r, list(lc.composer.lora.target_modules))
    encoder = pairs * stack_activation_bytes(s, wb, enc, False, ckpt, 0, lora_tok)
    qcompute = 2 if lc.composer.qformer.dtype == "bfloat16" else qb
    qformer = pairs * enc * wb * s.hidden if ckpt else qformer_activation_bytes(
        s, lc.composer.qformer, enc, pairs, qcompute, wb)
    est.step["teacher_activations"] = teach
    est.step["encoder_activations"] = encoder
    est.step["qformer_activations"] = qformer
    return teach + encoder + qformer


def fit_micro_batch_tokens(cfg: Any, hf_config: Any, budget_bytes: float, device: str = "cuda", *,
                           step: int = 256, **kw: Any) -> int:
    """The largest ``micro_batch_tokens`` (a multiple of ``step``) whose predicted peak fits
    ``budget_bytes``. Raises ValueError when even the static part (weights, optimiser, copies) or one
    step of tokens does not fit."""
    lo_est = predict_peak(cfg, hf_config, step, device, **kw)
    if lo_est.static_total > budget_bytes:
        raise ValueError(f"memory model: the static part alone ({lo_est.static_total / 1e9:.1f} GB: weights, "
                         f"AdamW states, copies) exceeds the budget {budget_bytes / 1e9:.1f} GB; shard it "
                         "(distributed.strategy=fsdp) or use a smaller model")
    if lo_est.total > budget_bytes:
        raise ValueError(f"memory model: not even {step} tokens fit {budget_bytes / 1e9:.1f} GB "
                         f"(predicted {lo_est.total / 1e9:.1f} GB)")
    lo, hi = 1, 2
    while predict_peak(cfg, hf_config, hi * step, device, **kw).total <= budget_bytes and hi < 1 << 20:
        lo, hi = hi, hi * 2
    while hi - lo > 1:  # predict(lo * step) fits, predict(hi * step) does not
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if predict_peak(cfg, hf_config, mid * step, device, **kw).total <= budget_bytes \
            else (lo, mid)
    return lo * step
