"""The settings of a demo or a comparison: what runs (:class:`RunSpec`) and how (:class:`DemoConfig`)."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from harness.basemodel.config import BaseModelConfig
from harness.config import NonNegInt, PosInt
from harness.prepare.stages import StageConfig


@dataclass
class RunSpec:
    """One curve: a learner and the config overrides that make it (ablations are overrides only)."""

    label: str
    """Name in tables and plots (unique within a comparison)."""
    learner: str
    """grpo, opsd, sdpo or lopd (its packaged config ``harness/configs/<learner>.yaml`` is the start)."""
    overrides: list[str] = field(default_factory=list)
    """``key=value`` TrainConfig overrides on top of the demo's own, e.g. ``lopd.margin.margin=0``."""


@dataclass
class DemoConfig(StageConfig):
    """The pipeline's settings; the learners' own settings come from their packaged configs."""

    out: str = "runs/demo"
    """Output directory: runs/, report.json, report.txt, curves.png."""
    base: BaseModelConfig = field(default_factory=BaseModelConfig)
    """The base model (its world, corpus and fit); the default is the project's base."""
    base_path: str | None = None
    """A built base folder (holding ``base_info.json``) used as it is, instead of the cached base of
    ``base``; its recorded config replaces ``base``. The cache key of a base covers the code that makes
    it, so while that code changes a pinned base keeps a long comparison on one model."""
    seeds: list[NonNegInt] = field(default_factory=lambda: [0])
    """Training seeds; every run spec trains once per seed."""
    generations: PosInt = 64
    """Rollout budget of every run (episodes played for training). The demo's default is a live check of the
    pipeline that fits ``make demo``'s 10 minutes; the comparison (benchmarks/protocols/) runs 640."""
    rollouts_per_step: PosInt = 32
    """Episodes per step (a multiple of GRPO's and SDPO's group size 4)."""
    eval_every: PosInt = 32
    """Evaluate on held-out tasks whenever the generation count crosses a multiple of this."""
    eval_tasks: PosInt = 30
    """Held-out tasks evaluated (the first N of ``eval_split``; each played once, greedily)."""
    eval_split: Literal["eval", "val"] = "eval"
    """The split evaluated during training: ``eval`` (the test tasks, which tables report) or ``val`` (the
    validation tasks, which a tuning sweep reads)."""
    val_tasks: NonNegInt = 0
    """Validation tasks of the world (``MicroEnv``'s ``n_val``): eval-split tasks after the test ones, with the
    held-out vocabulary; the test tasks are the same whatever this is."""
    threshold: float | None = None
    """Reward threshold of generations-to-threshold; None: the first run's final mean reward (GRPO's)."""
    overrides: list[str] = field(default_factory=list)
    """``key=value`` TrainConfig overrides applied to every run (before each spec's own)."""
    jobs: PosInt = 2
    """Runs trained at once, each in its own process (1: in this process, with per-step progress bars;
    more: one bar over the runs)."""
    threads: NonNegInt = 1
    """torch intra-op threads per process (a tiny model gains little from more)."""


def plain_config(cfg: DemoConfig) -> dict[str, Any]:
    """``cfg`` as plain JSON data (the report's ``config``)."""
    d = asdict(cfg)
    d["base"]["pretrain"]["betas"] = list(d["base"]["pretrain"]["betas"])
    return d


def copy_config(cfg: DemoConfig, **changes: Any) -> DemoConfig:
    """A deep copy of ``cfg`` with fields replaced."""
    new = copy.deepcopy(cfg)
    for k, v in changes.items():
        setattr(new, k, v)
    return new
