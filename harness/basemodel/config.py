"""What the micro world's base model is made of (:class:`BaseModelConfig`), and the env it was made for."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Literal

from envs.micro.env import MicroEnv
from harness.basemodel.pretrain import PretrainConfig
from harness.config import Fraction, NonNegFloat, NonNegInt, OneOf, PosFloat, PosInt

BASE_VERSION = 2
"""Bump to invalidate every cached base and the pinned one (when the corpus or the fit changes in code
the config does not name; 2: references in the experience bank's format)."""


def _presets() -> list[str]:
    from harness.models import PRESETS  # read when a preset is checked: transformers is heavy to import

    return sorted(PRESETS)


@dataclass
class BasePretrainConfig(PretrainConfig):
    """:class:`harness.basemodel.pretrain.PretrainConfig` with the base model's defaults (as class defaults, so a
    ``pretrain.<field>=...`` override keeps the others)."""

    epochs: PosFloat = 3.0
    """Passes over the world corpus (and the mixed drills)."""
    batch_tokens: PosInt = 1024
    """Most padded tokens in one batch (batch size x longest sequence)."""
    context_weight: NonNegFloat = 0.3
    """Weight of the next-token loss on prompt and tool-result tokens (see PretrainConfig)."""



@dataclass
class BaseModelConfig:
    """What the base model is made of. Every field is part of the cache key."""

    world_seed: int = 0
    """Seed of the micro world."""
    n_train: PosInt = 600
    """Train tasks of the world (the corpus draws from these only)."""
    n_eval: PosInt = 120
    """Held-out eval tasks (disjoint entities)."""
    prompt: Literal["compact", "full"] = "compact"
    """System prompt of the env: "compact" (summary + tool signatures) or "full" (authors + tools JSON)."""
    n_plain: NonNegInt = 1600
    """Noisy-expert trajectories in the corpus."""
    n_referenced: NonNegInt = 2400
    """Referenced trajectories in the corpus. They teach following a reference; more of them raise the
    reward with a reference and lower it without (docs/MICRO.md, "Fifth round")."""
    success: dict[str, float] = field(default_factory=dict)
    """Per-domain overrides of the noisy expert's probability of the right procedure (empty: defaults)."""
    corpus_seed: int = 0
    """Seed of the corpus draw."""
    rename_fraction: Fraction = 0.8
    """Share of transcripts whose entity names (people, products, titles, cities, ...) are replaced,
    consistently within the transcript, by pseudo-words (``rename_pool``). The world has only a few
    dozen train names, which a tiny model memorises instead of learning to copy; renamed transcripts
    make copying the only way to predict them, so held-out names work too."""
    rename_pool: Literal["fresh", "pseudo"] = "fresh"
    """Words renamed entities and copy drills get: "fresh" (a new pseudo-word on every draw,
    base_corpus.fresh_word: nothing to learn by heart, so only copying predicts them) or "pseudo" (the
    fixed pool of 480 pseudo-words, which a base learns by heart and then finishes held-out names
    with; docs/MICRO.md, "Fourth round")."""
    n_copy_drills: NonNegInt = 48000
    """Copy drills fitted before the world corpus (one epoch): a user message of random pseudo-names
    and ids that the assistant repeats. They grow the induction (copy) circuits that reading ids
    and names needs; a tiny model does not find them in the world corpus alone within the budget."""
    mixed_drills: NonNegInt = 12000
    """Further copy drills shuffled into the world corpus's fit, so copying keeps being practised
    while the procedures are learnt."""
    reference_result_chars: PosInt = 120
    """Tool results in a reference's experience text are cut to this many characters."""
    vocab_size: PosInt = 2048
    """BPE vocabulary (before the markup tokens)."""
    tokenizer: Literal["bpe"] = "bpe"
    """The tokenizer's layout; "bpe" (:func:`harness.basemodel.corpus.build_base_tokenizer`) is the only
    one: names and ids split into BPE pieces shared by both splits."""
    key_tokens: bool = True
    """One token per dict key as calls and results write it (``"owner": "``, ``'account_id': '``), and
    half of the copy drills become key-value recall drills over those keys: copying a value from
    after its key is then one induction step (docs/MICRO.md, "Third round")."""
    preset: Annotated[str, OneOf(_presets)] = "1m"
    """Tiny model preset (harness.models.PRESETS)."""
    rope_theta: PosFloat = 10000.0
    """RoPE base of the model (the presets use Qwen3's 1e6, made for 32K contexts; sequences here are
    a few hundred tokens, where a smaller base gives sharper relative positions)."""
    model_seed: int = 0
    """Seed of the model's initialisation."""
    pretrain: BasePretrainConfig = field(default_factory=lambda: BasePretrainConfig())
    """The supervised fit of the world corpus (the copy drills reuse it: one epoch, flat lr, no context
    loss, batches of at most 512 tokens)."""



def make_env(cfg: BaseModelConfig | dict[str, Any] | None = None, split: str | None = "train",
             **kwargs: Any) -> MicroEnv:
    """The micro env the base was trained for (same world and system prompt)."""
    cfg = as_config(cfg)
    return MicroEnv(cfg.world_seed, cfg.n_train, cfg.n_eval, prompt=cfg.prompt, split=split, **kwargs)



def env_kwargs(base: BaseModelConfig, n_val: int = 0) -> dict[str, Any]:
    """``gym.make("lopd/micro-v0", **env_kwargs(base))`` is the env the base was trained for (with ``n_val``
    validation tasks when given)."""
    kw = {"seed": base.world_seed, "n_train": base.n_train, "n_eval": base.n_eval, "prompt": base.prompt}
    return {**kw, "n_val": n_val} if n_val else kw


def as_config(cfg: BaseModelConfig | dict[str, Any] | None) -> BaseModelConfig:
    """``cfg`` as a BaseModelConfig (None: the defaults; a dict: as ``base_info.json`` records it)."""
    if cfg is None:
        return BaseModelConfig()
    if isinstance(cfg, BaseModelConfig):
        return cfg
    from harness.config import from_dict

    return from_dict(BaseModelConfig, cfg)



def plain_config(cfg: BaseModelConfig) -> dict[str, Any]:
    """``cfg`` as the plain dict ``base_info.json`` records (tuples as lists)."""
    d = asdict(cfg)
    d["pretrain"]["betas"] = list(d["pretrain"]["betas"])
    return d
