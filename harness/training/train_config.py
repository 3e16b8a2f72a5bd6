"""``TrainConfig``: every knob of ``lopd train``, one docstring per field.

Load it from YAML plus ``key=value`` overrides (:func:`harness.config.load_config`). Each learner
brings its own section, typed by its ``Config`` and found through the learner registry (so a
plugin's ``mine:`` section works like ``lopd:``); only the chosen learner's is used, so one file
can carry several::

    cfg = load_config(TrainConfig, "harness/configs/lopd.yaml", ["lopd.margin.margin=0", "generations=640"])
    cfg.learner_config.margin.margin      # 0.0: the chosen learner's section, also cfg.lopd

Defaults follow the paper (32 rollouts a step, temperature 0.7 / top-p 0.95 / top-k 20, AdamW
1e-5 with clip 1.0, 1,600 generations); the tiny model wants a larger ``optim.lr``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.config import Device, NonNegFloat, check_fields, NonNegInt, PosInt, Probability
from harness.engines.server import EngineConfig
from harness.learners.privileged import BankSpec
from harness.rollout import RolloutConfig
from lopd.config import OptimConfig


@dataclass
class ModelConfig:
    """The student (and the initial model every frozen teacher copies)."""

    path: str = "tiny:1m"
    """A local HF model directory; ``micro:pinned`` for the micro world's pinned base (the folder
    ``harness/pinned_base/``, trained for ``lopd/micro-v0``: its ``lopd_defaults.json`` fills in the env, the
    turn length and the turn limits a config leaves out, see :func:`load_train_config`);
    or ``tiny:<preset>`` for a randomly initialised tiny Qwen3 (1m, 5m), which scores 0 on any env."""
    tiny_seed: int = 0
    """Initialisation seed of a ``tiny:`` model."""
    num_hidden_layers: PosInt | None = None
    """Decoder layers of the student: a loaded or tiny model keeps its first N (fewer than it has; a
    checkpoint's other layers are not read), a ``--dry-run`` model with random weights is built with N
    (``model.num_hidden_layers=2`` keeps a Qwen3-4B dry run on a CPU small). None: the model's own count."""
    random_shape: dict[str, Any] = field(default_factory=dict)
    """``lopd train --dry-run`` only, for a model built with random weights (its weights not on disk):
    config.json fields set on its shape, e.g. ``{hidden_size: 64, intermediate_size: 128,
    num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16, vocab_size: 2048}`` to run a Qwen3-4B
    config's step at test size. Refused for a model whose weights load."""
    dtype: Literal["float32", "bfloat16", "float64"] = "float32"
    """Weights dtype (bfloat16 on GPUs). Losses are computed in fp32, or in float64 with float64
    weights (the numerics tests' setting, where rounding is negligible)."""
    device: Device = "cpu"
    """``cpu``, ``cuda`` or ``auto`` (CUDA when available)."""
    logits_chunk: NonNegInt = 1024
    """Positions per LM-head chunk in every loss (each chunk's [chunk, vocab] logits are reduced at once and
    recomputed in the backward; 0: one chunk, the whole micro-batch). A memory knob: results do not depend on it."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer in the backward instead of keeping its activations (results unchanged).
    Student, LOPD's teacher forward with gradients to the latents, the composer's encoder and QFormer:
    a layer keeps one [tokens, hidden] input instead of all its saved tensors, for about one more forward
    of compute. LOPD's teacher then runs the prompt before the first latent with the rest (no no-grad
    prefix cache)."""


@dataclass
class EnvConfig:
    """The registered environment and its task splits."""

    id: str = "lopd/shop-v0"
    """A registered env id (``lopd/micro-v0``, ``lopd/envscaler-v0``, ...)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``gymnasium.make`` (e.g. the micro world's n_train)."""
    url: str | None = None
    """An env served elsewhere (``lopd serve ID``, ``http://host:port``): training and evaluation play it
    through ``lopd/remote-v0``, exactly as in-process. ``id`` must name the served env; ``kwargs`` are the
    server's (give them to ``lopd serve``)."""
    train_split: str = "train"
    """Tasks of this split are trained on (and only they may enter the bank)."""
    eval_split: str = "eval"
    """Held-out tasks evaluated every ``eval.every_generations``."""
    max_train_tasks: PosInt | None = None
    """Use only the first N training tasks (by the env's order); None = all."""


@dataclass
class SamplingConfig:
    """How training rollouts sample (authors: 0.7 / 0.95 / 20)."""

    temperature: NonNegFloat = 0.7
    """Softmax temperature."""
    top_p: Probability = 0.95
    """Nucleus mass."""
    top_k: int = 20
    """Top-k filter; <= 0 disables."""
    max_new_tokens: PosInt = 1024
    """Most tokens per assistant turn."""


@dataclass
class TrainEvalConfig:
    """Held-out evaluation during training."""

    every_generations: NonNegInt = 320
    """Evaluate whenever the generation count crosses a multiple of this; 0 disables (but see ``at_end``)."""
    samples: PosInt = 1
    """Episodes per eval task."""
    temperature: NonNegFloat = 0.0
    """Sampling temperature of eval episodes (0 = greedy; top-p/top-k follow ``sampling``)."""
    max_tasks: PosInt | None = None
    """Evaluate only the first N eval tasks (by the env's order); None = all."""
    at_start: bool = True
    """Evaluate the initial model (generation 0)."""
    at_end: bool = True
    """Evaluate after the last step."""
    batch_size: PosInt = 64
    """Eval episodes played together per rank."""


@dataclass
class CheckpointConfig:
    """When and how many checkpoints are kept."""

    every_steps: NonNegInt = 10
    """Save after every N steps (and after the last); 0 saves only at the end."""
    keep: PosInt = 2
    """Newest checkpoints kept on disk (older ones are deleted after a save)."""
    resume: bool = True
    """Continue from the newest checkpoint in ``run_dir`` when there is one."""


@dataclass
class LogConfig:
    """Where metrics and traces go."""

    tensorboard: bool = False
    """Mirror metrics to TensorBoard under ``run_dir/tb`` (needs the tensorboard package)."""
    progress: bool = True
    """A tqdm bar over generations (rank 0)."""
    traces: bool = True
    """Write every rollout (train and eval) to ``run_dir/traces.jsonl``."""


@dataclass
class DistributedConfig:
    """Multi-process training under torchrun."""

    strategy: Literal["ddp", "fsdp"] = "ddp"
    """``ddp``: replicated student, gradients summed over ranks; ``fsdp``: FSDP2 ``fully_shard``
    per decoder layer (rollouts then play on an unsharded copy refreshed after every step)."""
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    """Process-group backend: auto = gloo on CPU, nccl on CUDA."""


@dataclass
class TrainConfig:
    """One training run."""

    run_dir: str = "runs/train"
    """Output directory: config.yaml, metrics.jsonl, traces.jsonl, checkpoints/."""
    learner: str = "grpo"
    """grpo, opsd, sdpo, lopd or sft, a name added with register_learner, or ``package.module:Class``."""
    seed: int = 0
    """Seeds the task order, sampling, env resets and initialisations."""
    generations: PosInt = 1600
    """Rollout budget: episodes played for training (SFT: examples consumed)."""
    rollouts_per_step: PosInt = 32
    """Episodes per step, all ranks together (a multiple of the group size)."""
    group_size: PosInt | None = None
    """Rollouts per task in a step; None = the learner's default (GRPO/SDPO 4, others 1)."""
    micro_batch_tokens: PosInt = 16384
    """Padded tokens per forward/backward (memory knob; results do not depend on it beyond float error)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """The student."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """The environment."""
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    """Training rollouts' sampling."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """Episode limits (max turns, context) and chat-template options."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    """Where rollouts run: the in-process HF engine (default) or vLLM/SGLang servers, attached or launched."""
    optim: OptimConfig = field(default_factory=OptimConfig)
    """The student's AdamW (lr 1e-5, clip 1.0)."""
    eval: TrainEvalConfig = field(default_factory=TrainEvalConfig)
    """Held-out evaluation."""
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    """Checkpoints and resume."""
    log: LogConfig = field(default_factory=LogConfig)
    """Metrics, traces, progress."""
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    """torchrun settings."""
    bank: BankSpec = field(default_factory=BankSpec)
    """The experience bank (LOPD retrieval, OPSD oracles)."""
    sections: dict[str, Any] = field(default_factory=dict, metadata={"sections": True})
    """Each learner's own section by learner name (``grpo:``, ``lopd:``, a plugin's), typed by that
    learner's ``Config``; in YAML they stand at the top level. Read one as ``cfg.<name>``."""

    @staticmethod
    def section_type(name: str, data: dict[str, Any]) -> type | None:
        """The type of a top-level section ``name``: the ``Config`` of the learner of that name."""
        from harness.learners.registry import learner_config_type

        return learner_config_type(name, data.get("learner"))

    def __getattr__(self, name: str) -> Any:
        """``cfg.grpo``, ``cfg.lopd``, a plugin's ``cfg.<name>``: that learner's section (its
        defaults when the config has none)."""
        sections = self.__dict__.get("sections")
        if name.startswith("_") or sections is None:
            raise AttributeError(name)
        if name not in sections:
            tp = self.section_type(name, {"learner": self.__dict__.get("learner")})
            if tp is None:
                raise AttributeError(f"TrainConfig has no field or learner section {name!r}")
            sections[name] = tp()
        return sections[name]

    @property
    def learner_config(self) -> Any:
        """The chosen learner's section (None for a learner that takes none)."""
        from harness.learners.registry import get_learner

        cls = get_learner(self.learner)
        return getattr(self, cls.name) if cls.Config is not None else None

    def __post_init__(self) -> None:
        check_fields(self)  # the ranges in the field types, also for a TrainConfig built in code


def load_train_config(path: str | None = None, overrides: list[str] | None = None,
                      log: Any = None) -> TrainConfig:
    """``load_config(TrainConfig, path, overrides)`` with the model folder's defaults (its
    ``lopd_defaults.json``: :mod:`harness.models.defaults`) under the file and the overrides, so a key
    either gives wins. Its env kwargs apply only to its env. ``log`` gets a line naming what was taken."""
    from harness.config import load_config, to_dict
    from harness.models.defaults import read_model_defaults

    cfg = load_config(TrainConfig, path, overrides)
    found = read_model_defaults(cfg.model.path)
    if found is None:
        return cfg
    layer = found[0].train_layer()
    out = load_config(TrainConfig, path, overrides, base=layer)
    if out.env.id != found[0].env.id and "env" in layer:  # another env was asked for: not its kwargs
        del layer["env"]
        out = load_config(TrainConfig, path, overrides, base=layer)
    before, after = to_dict(cfg), to_dict(out)
    taken = [f"{sec}.{k}={json.dumps(after[sec][k])}" for sec, keys in layer.items() for k in keys
             if before[sec][k] != after[sec][k]]
    if taken and log is not None:
        log(f"lopd train: defaults from {found[1]}: {', '.join(taken)} (the config file and overrides win)")
    return out
