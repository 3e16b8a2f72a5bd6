"""A comparison of learners a reviewer can accept: equal data, equal tuning on a validation split, seeds,
bootstrap intervals on the test split.

A :class:`Protocol` (YAML, ``benchmarks/protocols/*.yaml``) names everything that makes a comparison:

1. **tune**: every learner trains each of its ``sweep`` configurations (the same number for every learner)
   at the full budget on ``tune_seeds``, evaluated on the *validation* tasks; the configuration with the
   best validation area under the curve (mean reward over the budget points after 0) is chosen;
2. **test**: each learner's chosen configuration trains on ``seeds`` and is evaluated on the *test* tasks,
   as are the ``ablations`` (overrides on top of LOPD's choice);
3. **report**: curves with 95% bootstrap intervals over seeds and tasks, generations-to-threshold with its
   interval, a paired test of LOPD against each baseline, and the RL and total budgets (every episode a
   learner's data cost: the bank's and the cold start's rollouts as well as the RL ones)::

    proto = load_protocol("benchmarks/protocols/equal_data.yaml")
    chosen, tuning = tune(proto, "runs/cmp")
    report = run_test(proto, "runs/cmp", chosen)

Every run goes through :func:`harness.experiments.demo.run_pipeline`, so a finished run is reused when its spec is
unchanged and an interrupted comparison resumes where it stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.experiments.demo import DemoConfig, RunSpec, copy_config, run_pipeline

LEARNERS = ("grpo", "opsd", "sdpo", "lopd")


@dataclass
class LearnerPlan:
    """What one learner gets in a comparison."""

    fixed: list[str] = field(default_factory=list)
    """``key=value`` overrides of every run of this learner (the protocol's data rules, e.g. where OPSD's
    oracle comes from)."""
    sweep: list[list[str]] = field(default_factory=lambda: [[]])
    """The configurations tuned on validation, each a list of overrides; every learner gets as many."""


@dataclass
class Protocol:
    """One named comparison protocol."""

    name: str = "equal-data"
    """Its name in reports."""
    description: str = ""
    """One paragraph on what it controls for (printed at the top of the report)."""
    demo: DemoConfig = field(default_factory=DemoConfig)
    """The pipeline: base, bank, cold start, budget, evaluation (``eval_tasks``: test tasks; ``val_tasks``:
    validation tasks). ``out``, ``seeds``, ``eval_split`` and ``threshold`` are set per stage."""
    seeds: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 5])
    """Training seeds of the test stage (the tuning seeds are kept out, so that no reported run was chosen)."""
    tune_seeds: list[int] = field(default_factory=lambda: [0])
    """Training seeds of every sweep configuration."""
    tune_eval_every: int | None = None
    """Validation every this many generations while tuning (None: ``demo.eval_every``); sparser than the test
    curve to save evaluation, since the choice reads only the mean over the points."""
    grpo: LearnerPlan = field(default_factory=LearnerPlan)
    """GRPO's plan."""
    opsd: LearnerPlan = field(default_factory=LearnerPlan)
    """OPSD's plan."""
    sdpo: LearnerPlan = field(default_factory=LearnerPlan)
    """SDPO's plan."""
    lopd: LearnerPlan = field(default_factory=LearnerPlan)
    """LOPD's plan."""
    ablations: dict[str, list[str]] = field(default_factory=dict)
    """Label -> overrides on top of LOPD's chosen configuration, trained on ``ablation_seeds`` (test split)."""
    ablation_seeds: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 5])
    """Seeds of the ablations (the headline's, so that each ablation pairs with LOPD seed by seed)."""
    threshold_learner: str = "grpo"
    """Generations-to-threshold reads this learner's final mean test reward as the threshold."""
    n_boot: int = 2000
    """Bootstrap replicates of every interval."""

    def __post_init__(self) -> None:
        sizes = {n: len(self.plan(n).sweep) for n in LEARNERS}
        if len(set(sizes.values())) != 1 or 0 in sizes.values():
            raise ValueError(f"every learner must sweep the same number (> 0) of configurations, got {sizes}")
        for label, ov in self.ablations.items():
            if label in LEARNERS or not isinstance(ov, list) or not all(isinstance(o, str) for o in ov):
                raise ValueError(f"ablation {label!r}: want a new label and a list of key=value overrides")
        if self.threshold_learner not in LEARNERS:
            raise ValueError(f"threshold_learner must be one of {LEARNERS}")
        if self.demo.val_tasks <= 0:
            raise ValueError("demo.val_tasks must be > 0: tuning reads the validation tasks")
        if set(self.seeds) & set(self.tune_seeds):
            raise ValueError(f"seeds {self.seeds} and tune_seeds {self.tune_seeds} must not overlap")

    def plan(self, learner: str) -> LearnerPlan:
        return getattr(self, learner)


def load_protocol(path: str | Path, overrides: list[str] | None = None) -> Protocol:
    """A protocol YAML (``key=value`` overrides on top, e.g. ``demo.generations=320``)."""
    from harness.config import load_config

    return load_config(Protocol, path, overrides)


def stage_config(proto: Protocol, out: str | Path, stage: str) -> DemoConfig:
    """The pipeline settings of ``stage`` ("tune": validation tasks; "test": test tasks)."""
    d = proto.demo
    if stage == "tune":
        return copy_config(d, out=str(Path(out) / "tune"), seeds=list(proto.tune_seeds), eval_split="val",
                           eval_tasks=d.val_tasks, eval_every=proto.tune_eval_every or d.eval_every, threshold=None)
    return copy_config(d, out=str(Path(out) / "test"), seeds=list(proto.seeds), eval_split="eval", threshold=None)


def tune_specs(proto: Protocol) -> list[RunSpec]:
    """One run spec per learner and sweep configuration, labelled ``<learner>-c<i>``."""
    return [RunSpec(f"{n}-c{i}", n, [*proto.plan(n).fixed, *ov])
            for n in LEARNERS for i, ov in enumerate(proto.plan(n).sweep)]


def val_auc(curve: list[dict[str, Any]]) -> float:
    """Mean validation reward over the budget points after 0 (0 is the untrained model, the same for all)."""
    pts = [p["mean"] for p in curve if p["generations"] > 0]
    if not pts:
        raise ValueError("a tuning curve needs points after generation 0")
    return sum(pts) / len(pts)


def choose(proto: Protocol, report: dict[str, Any]) -> tuple[dict[str, int], dict[str, Any]]:
    """Each learner's sweep index with the best validation AUC (ties: the first listed), and the table."""
    chosen, table = {}, {}
    for n in LEARNERS:
        rows = []
        for i, ov in enumerate(proto.plan(n).sweep):
            v = report["specs"][f"{n}-c{i}"]
            rows.append({"config": i, "overrides": ov, "val_auc": val_auc(v["curve"]), "val_final": v["final"],
                         "seeds": v["seeds"], "curve": [[p["generations"], p["mean"]] for p in v["curve"]]})
        # rounded so that equal areas summed in another order still tie (and the first listed wins)
        chosen[n] = max(range(len(rows)), key=lambda i: (round(rows[i]["val_auc"], 9), -i))
        table[n] = rows
    return chosen, table


def tune(proto: Protocol, out: str | Path) -> tuple[dict[str, int], dict[str, Any]]:
    """Stage 1: train every sweep configuration on the validation tasks; returns (chosen, tuning report)."""
    rep = run_pipeline(stage_config(proto, out, "tune"), tune_specs(proto))
    chosen, table = choose(proto, rep)
    return chosen, {"chosen": chosen, "table": table, "timings": rep.get("timings"),
                    "runs": {r["label"] + f"-s{r['seed']}": r.get("summary", {}) for r in rep["runs"]}}


def headline_specs(proto: Protocol, chosen: dict[str, int]) -> list[RunSpec]:
    """The headline runs (each learner at its chosen configuration, the threshold learner first), then the
    ablations on top of LOPD's."""
    order = [proto.threshold_learner, *[n for n in LEARNERS if n != proto.threshold_learner]]
    specs = [RunSpec(n, n, [*proto.plan(n).fixed, *proto.plan(n).sweep[chosen[n]]]) for n in order]
    lopd = next(s for s in specs if s.learner == "lopd")
    specs += [RunSpec(label, "lopd", [*lopd.overrides, *ov]) for label, ov in proto.ablations.items()]
    return specs


def run_test(proto: Protocol, out: str | Path, chosen: dict[str, int], train: bool = True) -> dict[str, Any]:
    """Stage 2: the chosen configurations (and ablations) on the test tasks; returns the pipeline report.
    ``train=False`` reports the finished runs only (``report["missing"]`` names the others).

    The ablations train on ``ablation_seeds``; the pipeline trains every spec on one seed list, so they run as
    a second pipeline call into the same folder when the seed lists differ."""
    cfg = stage_config(proto, out, "test")
    specs = headline_specs(proto, chosen)
    main, abl = specs[:len(LEARNERS)], specs[len(LEARNERS):]
    if not abl or list(proto.ablation_seeds) == list(proto.seeds):
        return run_pipeline(cfg, specs, train)
    rep = run_pipeline(cfg, main, train)
    rep_abl = run_pipeline(copy_config(cfg, seeds=list(proto.ablation_seeds)), abl, train)
    rep["runs"] += rep_abl["runs"]
    rep["specs"].update(rep_abl["specs"])
    rep["coldstart"]["composers"].update(rep_abl["coldstart"]["composers"])
    rep["missing"] = rep.get("missing", []) + rep_abl.get("missing", [])
    return rep
