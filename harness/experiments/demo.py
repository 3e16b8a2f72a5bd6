"""The main job on the micro world: base -> bank -> cold start -> learners at an equal budget -> curves.

:func:`run_pipeline` does every stage, caching what is expensive and safe to reuse:

1. the base model (:func:`harness.basemodel.build.load_or_build_base`, cached under ``$LOPD_CACHE_DIR/base``);
2. the base plays ``bank_tasks`` training tasks; its successful episodes fill the experience bank
   (when fewer than ``min_bank`` succeed, the scripted expert's episodes on training tasks are added,
   and the report says so); cached under ``$LOPD_CACHE_DIR/demo/bank-<key>``;
3. the LOPD composer is warmed on (retrieved experiences -> successful trajectory) pairs
   (:func:`harness.training.coldstart.run_coldstart`, as ``lopd coldstart``), cached per composer
   configuration (``coldstart-<key>.pt``); with ``coldstart_source="referenced"`` the trajectories
   are the base's successes when it is given its top-1 bank experience as text (cached under
   ``cstraces-<key>``), so the latents learn to carry it;
4. every run (learner + config overrides, per seed) trains on the same tasks at the same
   generation budget and is evaluated on held-out tasks every ``eval_every`` generations
   (:mod:`harness.training.trainer`); a finished run is reused when its spec is unchanged;
5. the curves, generations-to-threshold and behaviour statistics (:mod:`harness.stats`) of the
   final students are tabulated and plotted (:mod:`harness.experiments.demo_report`)::

    cfg = DemoConfig(out="runs/demo", generations=256)
    result = run_pipeline(cfg, [RunSpec("grpo", "grpo"), RunSpec("lopd", "lopd")])
    print(format_report(result)); plot_curves(result, "runs/demo/curves.png")

``benchmarks/compare.py`` runs the full comparison (four learners, three seeds, the ablations)
through the same function.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from harness.experiments.demo_config import DemoConfig, RunSpec, copy_config, plain_config
from harness.experiments.demo_report import summarize
from harness.experiments.demo_runs import collect_runs, train_stage
from harness.prepare.stages import (
    Base,
    bank_stage,
    base_stage,
    coldstart,
    coldstart_pairs_stage,
    env_kwargs,
    say,
)

__all__ = ["DemoConfig", "RunSpec", "copy_config", "plan_runs", "run_overrides", "run_pipeline"]


def run_overrides(cfg: DemoConfig, base: Base, bank: Path, spec: RunSpec, seed: int, run_dir: Path) -> list[str]:
    """Every TrainConfig override of one run: the demo's, then ``cfg.overrides``, then the spec's."""
    return [
        f"run_dir={run_dir}", f"seed={seed}", f"generations={cfg.generations}",
        f"rollouts_per_step={cfg.rollouts_per_step}", f"model.path={base.path}",
        f"env.kwargs={json.dumps(env_kwargs(base.config, cfg.val_tasks))}", f"env.eval_split={cfg.eval_split}",
        f"sampling.max_new_tokens={cfg.max_new_tokens}",
        f"rollout.max_turns={cfg.max_turns}", f"eval.every_generations={cfg.eval_every}",
        f"eval.max_tasks={cfg.eval_tasks}", "eval.temperature=0.0", "eval.at_start=true", "eval.at_end=true",
        "checkpoint.every_steps=0", "checkpoint.keep=1", f"log.progress={str(cfg.progress and cfg.jobs == 1).lower()}",
        f"bank.path={bank / 'bank'}", f"bank.embedder={cfg.embedder}", "bank.grow=false",
        *cfg.overrides, *spec.overrides,
    ]


def needs_coldstart(cfg: DemoConfig, spec: RunSpec) -> bool:
    """Whether the demo warms this run's composer: an LOPD run whose overrides name no ``lopd.composer_init``
    (the packaged config's own path is for ``lopd prepare``, not for the demo's cached cold starts)."""
    given = any(o.startswith("lopd.composer_init=") for o in [*cfg.overrides, *spec.overrides])
    return spec.learner == "lopd" and not given and cfg.coldstart_steps > 0


def run_pipeline(cfg: DemoConfig, specs: list[RunSpec], train: bool = True) -> dict[str, Any]:
    """Every stage (module docstring); returns the report dict (also written to ``out/report.json``).
    ``train=False`` trains nothing and reports the finished runs only (``report["missing"]`` lists the rest)."""
    import torch

    from envs.micro.world import cache_root

    if len({s.label for s in specs}) != len(specs):
        raise ValueError("run labels must be unique")
    if not specs or not cfg.seeds:
        raise ValueError("nothing to run: give at least one run spec and one seed")
    t_start = time.perf_counter()
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    timings: dict[str, float] = {}
    base = base_stage(cfg, timings, config=cfg.base, path=cfg.base_path)
    cache = cache_root() / "demo"
    bank, bank_info = bank_stage(base, cfg, cache, timings)
    lopd = any(s.learner == "lopd" for s in specs)
    cs_traces, cs_info = coldstart_pairs_stage(base, cfg, bank, cache, timings, lopd=lopd)
    base.model = None  # the runs load their own copies
    jobs, coldstarts = plan_runs(cfg, specs, base, bank, cs_traces, cache, out, timings)
    missing = []
    if not train:
        from harness.experiments.demo_runs import finished, wanted

        done = [finished(run_dir, wanted(ov), cfg) for _, _, run_dir, ov in jobs]
        missing = [f"{j[0].label}-s{j[1]}" for j, ok in zip(jobs, done) if not ok]
        jobs = [j for j, ok in zip(jobs, done) if ok]
        specs = [s for s in specs if any(j[0].label == s.label for j in jobs)]
        if not specs:
            raise ValueError(f"no finished run in {out / 'runs'} to report")
    summaries = train_stage(cfg, jobs, timings) if train else {}
    report = summarize(collect_runs(cfg, jobs, summaries), specs, cfg.threshold)
    report["missing"] = missing
    timings["total"] = time.perf_counter() - t_start
    base_report = {k: base.info.get(k) for k in ("path", "cached", "pinned", "key", "parameters", "seconds")}
    report.update(config=plain_config(copy_config(cfg, base=base.config)), base=base_report, bank=bank_info,
                  coldstart={"traces": cs_info, "composers": coldstarts},
                  timings={k: round(v, 1) for k, v in timings.items()})
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report


def plan_runs(cfg: DemoConfig, specs: list[RunSpec], base: Base, bank: Path, cs_traces: list[Path],
              cache: Path, out: Path, timings: dict[str, float]) -> tuple[list[tuple], dict[str, Any]]:
    """3b. Every (spec, seed) run as ``(spec, seed, run_dir, overrides)``, seed by seed (an interrupted
    comparison then holds whole seeds of every spec), an LOPD run starting from its cold-start composer
    (:func:`coldstart`); and per label, that composer's path and whether it was cached."""
    from harness.config import load_config
    from harness.training.train_config import TrainConfig
    from harness.training.trainer import example_config

    jobs: list[tuple[RunSpec, int, Path, list[str]]] = []
    t0 = time.perf_counter()
    coldstarts: dict[str, Any] = {}
    for seed in cfg.seeds:
        for spec in specs:
            run_dir = out / "runs" / f"{spec.label}-s{seed}"
            ov = run_overrides(cfg, base, bank, spec, seed, run_dir)
            tcfg = load_config(TrainConfig, example_config(spec.learner), ov)
            if needs_coldstart(cfg, spec):
                path, built = coldstart(cfg, tcfg, ov, bank, cs_traces, cache)
                coldstarts[spec.label] = {"path": str(path), "cached": not built}
                if built:
                    say(cfg, f"[demo] cold start: {path}")
                ov.append(f"lopd.composer_init={path}")
            jobs.append((spec, seed, run_dir, [f"learner={spec.learner}", *ov]))
    timings["coldstart"] = time.perf_counter() - t0
    return jobs, coldstarts
