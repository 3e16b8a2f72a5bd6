"""Typed configs of the method core: losses, composer, margin, cold start, LOPD.

Every default is the paper's value. Where the paper and the authors' public code differ, the
code's choice is an option named in the field's docstring. The paper's ablations of these
defaults, and ours, are in benchmarks/RESULTS.md ("Micro-world comparison"). The configs are plain
dataclasses, so ``harness.config.load_config(LOPDConfig, "x.yaml", ["margin.margin=0"])`` loads
them and ``field_docs`` lists the docs.

>>> cfg = LOPDConfig()
>>> cfg.composer.qformer.n_latents * cfg.n_retrieved, cfg.margin.margin, cfg.distill.top_k
(96, 0.05, 20)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

Reduction = Literal["global_tokens", "per_sequence"]
# Allowed ranges, checked when harness.config loads a config (plain strings: lopd imports nothing of harness)
PosInt = Annotated[int, ">= 1"]
NonNegInt = Annotated[int, ">= 0"]
PosFloat = Annotated[float, "> 0"]
NonNegFloat = Annotated[float, ">= 0"]


@dataclass
class DistillConfig:
    """The student's distillation loss (LOPD, SDPO: top-k + tail reverse KL; OPSD, SDFT: forward KL)."""

    top_k: PosInt = 20
    """Teacher top-k token ids kept per supervised position; the rest is one tail bucket."""
    direction: Literal["reverse", "forward"] = "reverse"
    """``reverse`` = KL(student || teacher) (LOPD, SDPO); ``forward`` = KL(teacher || student)
    (OPSD, SDFT)."""
    full_vocab: bool = False
    """Use the full vocabulary instead of top-k + tail (as OPSD and SDFT do)."""
    reduction: Reduction = "global_tokens"
    """``global_tokens``: sum over all supervised tokens / their global count (authors' code);
    ``per_sequence``: mean per sequence, then mean over sequences."""


@dataclass
class GRPOLossConfig:
    """GRPO's loss: group-normalised advantages, PPO clip, optional KL to the reference."""

    clip_low: NonNegFloat = 0.2
    """PPO ratio lower clip: the ratio is clipped to >= 1 - clip_low."""
    clip_high: NonNegFloat = 0.2
    """PPO ratio upper clip: <= 1 + clip_high (Skill-SD uses 0.28)."""
    scale_by_std: bool = True
    """Divide the group-centred rewards by the group's standard deviation (GRPO); false = Dr. GRPO."""
    std_unbiased: bool = True
    """Bessel-corrected group std (torch.std default, as TRL); false = population std."""
    std_eps: NonNegFloat = 1e-6
    """Added to the group std before dividing, so an all-equal group gets advantage 0."""
    kl_coef: NonNegFloat = 0.0
    """Weight of the k3 KL estimate to the reference policy; 0 disables it."""
    reduction: Reduction = "global_tokens"
    """Token reduction of the policy loss (see :class:`DistillConfig.reduction`)."""


@dataclass
class QFormerConfig:
    """The perceiver-resampler compressor: x = Linear(H); 32 queries; one shared block applied 8 times."""

    n_latents: PosInt = 32
    """Learned queries = latent tokens per experience."""
    depth: PosInt = 8
    """How many times the ONE shared (attention, feed-forward) block is applied."""
    n_heads: PosInt | None = None
    """Attention heads; None = the backbone's ``num_attention_heads``. Head width = d // n_heads."""
    ff_mult: PosInt = 4
    """Feed-forward hidden width = ff_mult * d."""
    share_layers: bool = True
    """One block shared over all passes (paper and code); false gives ``depth`` separate blocks."""
    dtype: Literal["float32", "bfloat16", "float64"] = "float32"
    """Parameter dtype of the QFormer (authors' code casts it to bfloat16 on GPU; float64 for
    numerics tests)."""
    master_weights: bool = True
    """With ``dtype: bfloat16``: true keeps the parameters in float32 (the master copy AdamW steps)
    and runs the QFormer in bfloat16 (weights cast at each forward); false stores them in bfloat16
    and AdamW steps them directly (authors' code: an update below half a bf16 ulp is lost). No
    effect for float32 and float64."""


@dataclass
class EncoderLoRAConfig:
    """The composer encoder's LoRA on the frozen backbone."""

    r: PosInt = 8
    """LoRA rank."""
    alpha: PosInt = 16
    """LoRA alpha (scale alpha / r)."""
    dropout: Annotated[float, ">= 0", "< 1"] = 0.0
    """LoRA dropout."""
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    """Projection modules that get an adapter."""
    adapter_name: str = "composer"
    """peft adapter name."""


@dataclass
class ComposerConfig:
    """Composer = frozen backbone + LoRA encoder + QFormer."""

    qformer: QFormerConfig = field(default_factory=QFormerConfig)
    """The compressor."""
    lora: EncoderLoRAConfig = field(default_factory=EncoderLoRAConfig)
    """The encoder adapter."""
    task_prefix: str = "Task to solve:\n{task}\n\nReference past trajectory:\n"
    """Text before each experience; ``{task}`` takes the current task (task-conditional encoding)."""
    task_conditional: bool = True
    """Prefix each experience with the task (paper and code); false encodes the experience alone."""
    max_encoder_tokens: PosInt | None = None
    """Truncate each encoder input to this many tokens (keeping the start); None = no limit."""
    encode_batch_size: PosInt = 1
    """Experiences per encoder forward pass (results do not depend on it beyond float error). Rows
    are sorted by length first; 1 computes no padding and takes the attention's causal fast path
    (fastest on CPU, and an experience of a few thousand tokens already fills an accelerator);
    raise it for many short experiences on an accelerator."""
    anchor_cache_entries: NonNegInt = 4096
    """Anchor latents c_phi0 kept (on the CPU, least recently used evicted) per (task, experience)
    pair, since c_phi0 is fixed after cold start (the authors cache them on disk); 0 recomputes
    them every step."""


@dataclass
class MarginConfig:
    """The composer loss: kl_i + beta * (m - Delta_i) + lambda * anchor_i, with dual ascent on beta."""

    margin: float = 0.05
    """Privileged margin m: the dual variable beta grows while the mean Delta stays below m."""
    anchor_weight: NonNegFloat = 0.2
    """lambda: weight of mean((c_phi - c_phi0)^2)."""
    dual_lr: NonNegFloat = 0.5
    """eta: beta <- max(0, beta + eta * (m - mean Delta))."""
    beta_init: NonNegFloat = 0.0
    """beta_0."""
    dual_mean: Literal["rollout", "token_weighted"] = "rollout"
    """Mean Delta for the dual update: over rollouts (paper) or weighted by each rollout's supervised
    token count, counted over ``token_scope`` (authors' code)."""
    token_scope: Literal["tool_call", "assistant"] = "tool_call"
    """Tokens kl_i and Delta_i average over: ``tool_call``, the tokens of the ``<tool_call>...
    </tool_call>`` blocks (the paper: "per action token"), or ``assistant``, every supervised
    assistant token, reasoning and end of turn included (authors' code). A rollout without a tool
    call has kl_i = Delta_i = 0 under ``tool_call``. The student's loss always covers every
    assistant token."""


@dataclass
class OptimConfig:
    """AdamW settings."""

    lr: PosFloat = 1e-5
    """Learning rate."""
    weight_decay: NonNegFloat = 0.01
    """AdamW weight decay. The paper names none; torch's AdamW default 0.01 is what the authors' code uses."""
    grad_clip: float = 1.0
    """Max total grad norm; <= 0 disables clipping."""


@dataclass
class ColdStartConfig:
    """Composer warm-up: NLL of a successful trajectory through the frozen base with latents injected."""

    steps: PosInt = 1000
    """Optimiser steps."""
    batch_size: PosInt = 8
    """Pairs (retrieved experiences -> successful trajectory) per step."""
    micro_batch_size: PosInt = 2
    """Pairs per forward/backward (authors: 2); gradients accumulate to ``batch_size``."""
    lr: PosFloat = 1e-5
    """AdamW learning rate of LoRA and QFormer."""
    grad_clip: float = 3.0
    """Grad-norm clip (paper: 3.0; the code applies it to the LoRA only)."""
    qformer_grad_clip: PosFloat | None = None
    """None = one clip over all trainable parameters (paper); a number = clip the QFormer on its own
    at this norm and the LoRA at ``grad_clip`` (authors' code: 30.0)."""
    weight_decay: NonNegFloat = 0.01
    """AdamW weight decay (see :class:`OptimConfig`)."""
    min_reward: Annotated[float, ">= 0", "<= 1"] = 1.0
    """Trajectories the cold start teaches the latents to predict: training episodes with reward >= this
    (1.0: successes, as the paper and the authors' code)."""
    separate_optimizers: bool = False
    """One AdamW with a LoRA and a QFormer group (false), or one AdamW each (authors' code). The
    updates are the same, except that a group whose gradient norm is not finite skips only its own
    step with two optimisers, and the whole step with one."""


@dataclass
class LOPDConfig:
    """Everything the LOPD learner needs from the method core."""

    n_retrieved: PosInt = 3
    """Experiences retrieved per task."""
    allow_self_retrieval: bool = False
    """Let a task retrieve its own bank entry (paper: excluded; authors' configs: allowed)."""
    train_composer: bool = True
    """Update the composer during RL; false = the frozen-composer ablation."""
    unretrieved: Literal["plain_teacher", "drop"] = "plain_teacher"
    """A rollout whose task retrieved nothing: ``plain_teacher`` distils it from the teacher without
    latents (the plain prompt); ``drop`` leaves it unsupervised and out of every mean (authors' code:
    "nothing retrieved, no supervision")."""
    teacher_graph: Literal["with_student", "after_student"] = "with_student"
    """When the latent teacher keeps its graph (a trained composer): ``with_student`` scores it once and
    its graph lives through the student's forward; ``after_student`` scores it without a graph first, backs
    up the student's loss, then reruns it with a graph for the composer's backward, so the two graphs are
    never alive together (peak: the larger, not their sum) for one more teacher forward. The same loss and
    gradients either way."""
    composer: ComposerConfig = field(default_factory=ComposerConfig)
    """Encoder + QFormer."""
    distill: DistillConfig = field(default_factory=DistillConfig)
    """The student's top-k + tail reverse KL."""
    margin: MarginConfig = field(default_factory=MarginConfig)
    """Privileged margin, dual variable and anchor."""
    composer_optim: OptimConfig = field(default_factory=OptimConfig)
    """Composer optimiser during RL (AdamW 1e-5, clip 1.0)."""
    coldstart: ColdStartConfig = field(default_factory=ColdStartConfig)
    """Composer warm-up before RL."""

    @property
    def n_latents_total(self) -> int:
        """Latent tokens injected per task (32 x 3 = 96)."""
        return self.composer.qformer.n_latents * self.n_retrieved
