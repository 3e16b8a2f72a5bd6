"""The main job on the micro world: base -> bank -> cold start -> learners at an equal budget -> curves.

:func:`run_pipeline` does every stage, caching what is expensive and safe to reuse:

1. the base model (:func:`harness.base_model.load_or_build_base`, cached under ``$LOPD_CACHE_DIR/base``);
2. the base plays ``bank_tasks`` training tasks; its successful episodes fill the experience bank
   (when fewer than ``min_bank`` succeed, the scripted expert's episodes on training tasks are added,
   and the report says so); cached under ``$LOPD_CACHE_DIR/demo/bank-<key>``;
3. the LOPD composer is warmed on (retrieved experiences -> successful trajectory) pairs
   (:func:`harness.coldstart_run.run_coldstart`, as ``lopd coldstart``), cached per composer
   configuration (``coldstart-<key>.pt``); with ``coldstart_source="referenced"`` the trajectories
   are the base's successes when it is given its top-1 bank experience as text (cached under
   ``cstraces-<key>``), so the latents learn to carry it;
4. every run (learner + config overrides, per seed) trains on the same tasks at the same
   generation budget and is evaluated on held-out tasks every ``eval_every`` generations
   (:mod:`harness.trainer`); a finished run is reused when its spec is unchanged;
5. the curves, generations-to-threshold and behaviour statistics (:mod:`harness.stats`) of the
   final students are tabulated and plotted (:mod:`harness.demo_report`)::

    cfg = DemoConfig(out="runs/demo", generations=256)
    result = run_pipeline(cfg, [RunSpec("grpo", "grpo"), RunSpec("lopd", "lopd")])
    print(format_report(result)); plot_curves(result, "runs/demo/curves.png")

``benchmarks/compare.py`` runs the full comparison (four learners, three seeds, the ablations)
through the same function.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from harness.atomic_dir import build_dir
from harness.base_model import BaseModelConfig
from harness.demo_report import summarize
from harness.demo_runs import DEMO_VERSION, _bar, collect_runs, train_stage


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
class DemoConfig:
    """The pipeline's settings; the learners' own settings come from their packaged configs."""

    out: str = "runs/demo"
    """Output directory: runs/, report.json, report.txt, curves.png."""
    base: BaseModelConfig = field(default_factory=BaseModelConfig)
    """The base model (its world, corpus and fit); the default is the project's base."""
    base_path: str | None = None
    """A built base folder (holding ``base_info.json``) used as it is, instead of the cached base of
    ``base``; its recorded config replaces ``base``. The cache key of a base covers the code that makes
    it, so while that code changes a pinned base keeps a long comparison on one model."""
    seeds: list[int] = field(default_factory=lambda: [0])
    """Training seeds; every run spec trains once per seed."""
    generations: int = 64
    """Rollout budget of every run (episodes played for training). The demo's default is a live check of the
    pipeline that fits ``make demo``'s 10 minutes; the comparison (benchmarks/protocols/) runs 640."""
    rollouts_per_step: int = 32
    """Episodes per step (a multiple of GRPO's and SDPO's group size 4)."""
    eval_every: int = 32
    """Evaluate on held-out tasks whenever the generation count crosses a multiple of this."""
    eval_tasks: int = 30
    """Held-out tasks evaluated (the first N of ``eval_split``; each played once, greedily)."""
    eval_split: Literal["eval", "val"] = "eval"
    """The split evaluated during training: ``eval`` (the test tasks, which tables report) or ``val`` (the
    validation tasks, which a tuning sweep reads)."""
    val_tasks: int = 0
    """Validation tasks of the world (``MicroEnv``'s ``n_val``): eval-split tasks after the test ones, with the
    held-out vocabulary; the test tasks are the same whatever this is."""
    max_new_tokens: int = 96
    """Tokens per assistant turn (training, evaluation and the bank rollouts)."""
    max_turns: int = 8
    """Assistant turns per episode (every micro-world procedure ends within 6)."""
    bank_tasks: int = 200
    """Training tasks the base plays once each (temperature ``bank_temperature``) to fill the bank (the
    comparison plays all 600, so that every procedure has a chance to be in it; the demo a third)."""
    bank_temperature: float = 0.7
    """Sampling temperature of the bank rollouts (the training rollouts' temperature)."""
    min_bank: int = 0
    """When fewer successful base episodes than this exist, the scripted expert's episodes on training
    tasks top the bank up to this size (reported as ``bank.expert``, data the base did not generate).
    0 (the default) never adds any."""
    embedder: Literal["model", "hashing"] = "model"
    """Bank retrieval embeddings: the bank's MiniLM model, or the lexical hashing embedder (no model)."""
    coldstart_source: Literal["base", "referenced"] = "referenced"
    """Trajectories the cold start teaches the latents to predict. ``base``: the bank's successful base
    episodes (the paper's recipe; at micro scale the base predicts its own successes at ~0.01 nats a
    token, so the latents learn to stay out of the way and carry nothing). ``referenced``: successful
    episodes of the base given the task's top-1 bank experience as a text reference, which include
    tasks it fails alone; the latents must then carry what the text carried."""
    coldstart_tasks: int = 100
    """Training tasks the base plays with a text reference for ``coldstart_source=referenced`` (the
    comparison plays all 600)."""
    coldstart_steps: int = 20
    """Composer cold-start steps (LOPD runs). On the r14 base the latent teacher's held-out reward
    grows with them: 0.30 without context, 0.37 after 40 steps of 4, 0.48 after 200 of 8, against
    0.55 with the same top-1 experience as text (docs/MICRO.md); the demo's 20 of 8 fit its 10 minutes (its LOPD run checks the pipeline, not the method),
    the comparison runs 200 of 8."""
    coldstart_batch: int = 8
    """Cold-start pairs per step."""
    coldstart_lr: float = 1e-4
    """Cold-start learning rate (the paper's 1e-5 is for 4B-8B backbones)."""
    threshold: float | None = None
    """Reward threshold of generations-to-threshold; None: the first run's final mean reward (GRPO's)."""
    overrides: list[str] = field(default_factory=list)
    """``key=value`` TrainConfig overrides applied to every run (before each spec's own)."""
    jobs: int = 2
    """Runs trained at once, each in its own process (1: in this process, with per-step progress bars;
    more: one bar over the runs)."""
    threads: int = 1
    """torch intra-op threads per process (a tiny model gains little from more)."""
    progress: bool = True
    """tqdm progress bars."""


# ---- stage 1: base ---------------------------------------------------------------------------------
def load_base_dir(path: str | os.PathLike) -> tuple[Any, Any, dict[str, Any]]:
    """``(model, tokenizer, info)`` of a built base folder (``info["config_obj"]``: its BaseModelConfig)."""
    from harness.config import from_dict
    from harness.models import load_model

    path = Path(path)
    if not (path / "base_info.json").is_file():
        raise FileNotFoundError(f"{path} is not a built base (no base_info.json)")
    info = json.loads((path / "base_info.json").read_text(encoding="utf-8"))
    model, tok = load_model(path)
    info.update(path=str(path), cached=True, config_obj=from_dict(BaseModelConfig, info["config"]))
    return model, tok, info


def env_kwargs(base: BaseModelConfig, n_val: int = 0) -> dict[str, Any]:
    """``gym.make("lopd/micro-v0", **env_kwargs(base))`` is the env the base was trained for (with ``n_val``
    validation tasks when given)."""
    kw = {"seed": base.world_seed, "n_train": base.n_train, "n_eval": base.n_eval, "prompt": base.prompt}
    return {**kw, "n_val": n_val} if n_val else kw


def _key(*parts: Any) -> str:
    blob = json.dumps([DEMO_VERSION, *parts], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ---- stage 2: bank ---------------------------------------------------------------------------------
def _play(model: Any, tok: Any, cfg: DemoConfig, ids: list[str], out: Path, desc: str, phase: str,
          references: dict[str, str] | None = None) -> tuple[int, int]:
    """The base plays each training task of ``ids`` once (temperature ``bank_temperature``), with
    ``references[task_id]`` framed into its first user message when given; every episode goes to
    ``out`` (traces). Returns (episodes, successes)."""
    import gymnasium as gym

    import envs  # noqa: F401
    from envs.trace import TraceWriter
    from harness.base_model import referenced_prompts
    from harness.engines import HFEngine, SamplingParams
    from harness.rollout import RolloutConfig, rollout

    kw = env_kwargs(cfg.base)
    engine = HFEngine(model, tok)
    batch = 32
    envs_ = [gym.make("lopd/micro-v0", max_steps=cfg.max_turns, **kw) for _ in range(min(batch, len(ids)))]
    bar = _bar(len(ids), desc, "ep", cfg.progress)
    ok = 0
    with TraceWriter(out) as w:
        for s in range(0, len(ids), batch):
            chunk = ids[s:s + batch]
            sampling = SamplingParams(temperature=cfg.bank_temperature, top_p=0.95, top_k=20,
                                      max_new_tokens=cfg.max_new_tokens, seed=1000 + s)
            trajs = rollout(envs_[: len(chunk)], engine, tok, sampling=sampling,
                            config=RolloutConfig(max_turns=cfg.max_turns), options=[{"task_id": t} for t in chunk],
                            build_prompt=referenced_prompts(tok, chunk, references) if references is not None else None,
                            meta={"run": "base", "learner": "base", "phase": phase})
            for tr in trajs:
                w.write(tr.episode)
                ok += tr.episode.reward >= 1.0
            if bar is not None:
                bar.update(len(chunk))
                bar.set_postfix(success=ok)
    if bar is not None:
        bar.close()
    engine.close()
    return len(ids), ok


def _train_tasks(cfg: DemoConfig, n: int) -> list[Any]:
    """The first ``n`` training tasks of the base's world."""
    import gymnasium as gym

    import envs  # noqa: F401

    env0 = gym.make("lopd/micro-v0", **env_kwargs(cfg.base)).unwrapped
    return [t for t in env0.all_tasks() if t.split == "train"][:n]


def _embedder(cfg: DemoConfig) -> Any:
    """The bank's retrieval embedder of ``cfg.embedder`` (None: the bank's own model)."""
    from harness.learners.privileged import HashingEmbedder

    return HashingEmbedder() if cfg.embedder == "hashing" else None


def _expert_episodes(cfg: DemoConfig, n: int, out: Path) -> int:
    """The scripted expert's correct procedure on ``n`` training tasks (from the end of the split)."""
    import gymnasium as gym

    import envs  # noqa: F401
    from envs.micro.expert import run_solver
    from envs.trace import Episode, TraceWriter

    env = gym.make("lopd/micro-v0", **env_kwargs(cfg.base)).unwrapped
    train = [t.task_id for t in env.all_tasks() if t.split == "train"]
    written = 0
    with TraceWriter(out) as w:
        for tid in reversed(train[-n:] if n else []):
            run_solver(env, tid)
            w.write(Episode(env_id="lopd/micro-v0", task_id=tid, split="train", messages=env.messages,
                            tools=env.tools.schemas, steps=env.steps, reward=env.final_reward, terminated=True,
                            meta={"run": "expert", "learner": "expert", "phase": "bank"}))
            written += 1
    return written


def bank_config(cfg: DemoConfig) -> Any:
    """The bank's settings: results cut where the base's pretraining references cut them, so the
    bank's experiences read exactly like the references the base learnt to use."""
    from lopd.bank import BankConfig

    return BankConfig(observation_chars=cfg.base.reference_result_chars)


def bank_key(cfg: DemoConfig, base_info: dict[str, Any]) -> str:
    return _key("bank", base_info["key"], cfg.bank_tasks, cfg.bank_temperature, cfg.min_bank, cfg.embedder,
                cfg.max_new_tokens, cfg.max_turns)


def build_bank_dir(model: Any, tok: Any, cfg: DemoConfig, base_info: dict[str, Any], cache: Path) -> tuple[Path, dict]:
    """The cached bank folder (``bank/``, ``base_traces.jsonl``, ``expert_traces.jsonl``, ``info.json``)."""
    target = cache / f"bank-{bank_key(cfg, base_info)}"

    def build(tmp: Path) -> None:
        from lopd.bank import ExperienceBank

        t0 = time.perf_counter()
        ids = [t.task_id for t in _train_tasks(cfg, cfg.bank_tasks)]
        played, ok = _play(model, tok, cfg, ids, tmp / "base_traces.jsonl", "bank: base rollouts", "bank")
        expert = _expert_episodes(cfg, max(0, cfg.min_bank - ok), tmp / "expert_traces.jsonl")
        bank = ExperienceBank.build([tmp / "base_traces.jsonl", tmp / "expert_traces.jsonl"],
                                    config=bank_config(cfg), embedder=_embedder(cfg))
        bank.save(tmp / "bank")
        info = {"base_episodes": played, "base_successes": ok, "expert": expert, "entries": len(bank),
                "seconds": round(time.perf_counter() - t0, 2)}
        (tmp / "info.json").write_text(json.dumps(info, indent=1) + "\n")

    built = build_dir(target, build, "DONE")
    info = json.loads((target / "info.json").read_text())
    info.update(path=str(target), cached=not built)
    return target, info


def coldstart_traces_dir(model: Any, tok: Any, cfg: DemoConfig, bank: Path, cache: Path) -> tuple[Path, dict]:
    """The cached folder of the base's referenced episodes (``traces.jsonl``, ``info.json``): each of
    ``coldstart_tasks`` training tasks played once with its top-1 bank experience (never its own) framed
    in as a text reference."""
    target = cache / f"cstraces-{_key('cstraces', str(bank), cfg.coldstart_tasks, cfg.bank_temperature)}"

    def build(tmp: Path) -> None:
        from lopd.bank import ExperienceBank

        t0 = time.perf_counter()
        tasks = _train_tasks(cfg, cfg.coldstart_tasks)
        lib = ExperienceBank.load(bank / "bank", embedder=_embedder(cfg))
        hits = lib.search([t.prompt for t in tasks], k=1, env="lopd/micro-v0", task_ids=[t.task_id for t in tasks])
        refs = {t.task_id: row[0].experience.text for t, row in zip(tasks, hits) if row}
        played, ok = _play(model, tok, cfg, list(refs), tmp / "traces.jsonl", "cold start: referenced rollouts",
                           "coldstart", references=refs)
        info = {"episodes": played, "successes": ok, "seconds": round(time.perf_counter() - t0, 2)}
        (tmp / "info.json").write_text(json.dumps(info, indent=1) + "\n")

    built = build_dir(target, build, "DONE")
    info = json.loads((target / "info.json").read_text())
    info.update(path=str(target), cached=not built)
    return target, info


# ---- stage 3 and 4: cold start and runs -------------------------------------------------------------
def run_overrides(cfg: DemoConfig, base_path: str, bank: Path, spec: RunSpec, seed: int, run_dir: Path) -> list[str]:
    """Every TrainConfig override of one run: the demo's, then ``cfg.overrides``, then the spec's."""
    return [
        f"run_dir={run_dir}", f"seed={seed}", f"generations={cfg.generations}",
        f"rollouts_per_step={cfg.rollouts_per_step}", f"model.path={base_path}",
        f"env.kwargs={json.dumps(env_kwargs(cfg.base, cfg.val_tasks))}", f"env.eval_split={cfg.eval_split}",
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


def coldstart_key(cfg: DemoConfig, train_cfg: Any, bank: Path, traces: list[Path]) -> str:
    """Everything a cold start reads: the bank, the pairs, the composer, its training settings (the demo's
    steps, batch and lr over the run's ``lopd.coldstart``), its seed and the base model; not the run's
    seed."""
    lo = train_cfg.lopd
    settings = replace(lo.coldstart, steps=cfg.coldstart_steps, batch_size=cfg.coldstart_batch,
                       lr=cfg.coldstart_lr)
    return _key("coldstart", str(bank), [str(t) for t in traces], asdict(lo.composer), asdict(settings),
                lo.n_retrieved, lo.allow_self_retrieval, lo.framing, lo.composer_seed, train_cfg.model.path)


def coldstart(cfg: DemoConfig, train_cfg: Any, overrides: list[str], bank: Path, traces: list[Path],
              cache: Path) -> tuple[Path, bool]:
    """The cold-start composer file for this run's composer settings (built once, then cached)."""
    target = cache / f"coldstart-{coldstart_key(cfg, train_cfg, bank, traces)}"

    def build(tmp: Path) -> None:
        from harness.coldstart_run import run_coldstart
        from harness.config import load_config
        from harness.train_config import TrainConfig

        ov = [o for o in overrides if not o.startswith(("run_dir=", "lopd.composer_init="))]
        ov += [f"run_dir={tmp}", f"lopd.coldstart.steps={cfg.coldstart_steps}",
               f"lopd.coldstart.batch_size={cfg.coldstart_batch}", f"lopd.coldstart.lr={cfg.coldstart_lr}",
               f"log.progress={str(cfg.progress).lower()}"]
        run_coldstart(load_config(TrainConfig, None, ov), [str(t) for t in traces], tmp / "composer.pt")

    built = build_dir(target, build, "DONE")
    return target / "composer.pt", built


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
    cfg, model, tok, base_info = base_stage(cfg, timings)
    cache = cache_root() / "demo"
    bank, bank_info = bank_stage(model, tok, cfg, base_info, cache, timings)
    cs_traces, cs_info = coldstart_pairs_stage(model, tok, cfg, specs, bank, cache, timings)
    del model
    jobs, coldstarts = plan_runs(cfg, specs, base_info["path"], bank, cs_traces, cache, out, timings)
    missing = []
    if not train:
        from harness.demo_runs import finished, wanted

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
    base = {k: base_info.get(k) for k in ("path", "cached", "pinned", "key", "parameters", "seconds")}
    report.update(config=_plain(cfg), base=base, bank=bank_info,
                  coldstart={"traces": cs_info, "composers": coldstarts},
                  timings={k: round(v, 1) for k, v in timings.items()})
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report


def base_stage(cfg: DemoConfig, timings: dict[str, float]) -> tuple[DemoConfig, Any, Any, dict[str, Any]]:
    """1. ``(cfg, model, tokenizer, info)`` of the base: ``cfg.base_path`` as it is (``cfg.base`` then
    becomes its recorded config), else the cached base of ``cfg.base``, built on a miss."""
    from harness.base_model import load_or_build_base

    t0 = time.perf_counter()
    if cfg.base_path:
        model, tok, base_info = load_base_dir(cfg.base_path)
        cfg = copy_config(cfg, base=base_info["config_obj"])
    else:
        model, tok, base_info = load_or_build_base(cfg.base, progress=cfg.progress)
    timings["base"] = time.perf_counter() - t0
    how = "pinned" if base_info.get("pinned") else "cached" if base_info["cached"] else "built"
    _say(cfg, f"[demo] base model {base_info['path']} ({how}, {timings['base']:.0f}s)")
    return cfg, model, tok, base_info


def bank_stage(model: Any, tok: Any, cfg: DemoConfig, base_info: dict[str, Any], cache: Path,
               timings: dict[str, float]) -> tuple[Path, dict[str, Any]]:
    """2. The bank folder (:func:`build_bank_dir`) and its info."""
    t0 = time.perf_counter()
    bank, bank_info = build_bank_dir(model, tok, cfg, base_info, cache)
    timings["bank"] = time.perf_counter() - t0
    _say(cfg, f"[demo] bank: {bank_info['entries']} experiences (base {bank_info['base_successes']} successes of "
              f"{bank_info['base_episodes']}, expert {bank_info['expert']}; "
              f"{'cached' if bank_info['cached'] else 'built'}, {timings['bank']:.0f}s)")
    return bank, bank_info


def coldstart_pairs_stage(model: Any, tok: Any, cfg: DemoConfig, specs: list[RunSpec], bank: Path,
                          cache: Path, timings: dict[str, float]) -> tuple[list[Path], dict[str, Any]]:
    """3a. The trace files the cold-start pairs come from, and what the report says of them: the
    bank's own episodes, or (``coldstart_source="referenced"``, when an LOPD run is cold-started) the
    base's referenced episodes (:func:`coldstart_traces_dir`)."""
    cs_traces = [bank / "base_traces.jsonl", bank / "expert_traces.jsonl"]
    cs_info: dict[str, Any] = {"source": cfg.coldstart_source}
    if cfg.coldstart_source == "referenced" and cfg.coldstart_steps > 0 and any(r.learner == "lopd" for r in specs):
        t0 = time.perf_counter()
        folder, info = coldstart_traces_dir(model, tok, cfg, bank, cache)
        # the expert's episodes are there only when the base solved too few tasks to fill the bank
        cs_traces, cs_info = [folder / "traces.jsonl", bank / "expert_traces.jsonl"], {**cs_info, **info}
        timings["coldstart_traces"] = time.perf_counter() - t0
        _say(cfg, f"[demo] cold-start pairs: {info['successes']} successes of {info['episodes']} referenced "
                  f"base episodes ({'cached' if info['cached'] else 'built'}, {timings['coldstart_traces']:.0f}s)")
    return cs_traces, cs_info


def plan_runs(cfg: DemoConfig, specs: list[RunSpec], base_path: str, bank: Path, cs_traces: list[Path],
              cache: Path, out: Path, timings: dict[str, float]) -> tuple[list[tuple], dict[str, Any]]:
    """3b. Every (spec, seed) run as ``(spec, seed, run_dir, overrides)``, seed by seed (an interrupted
    comparison then holds whole seeds of every spec), an LOPD run starting from its cold-start composer
    (:func:`coldstart`); and per label, that composer's path and whether it was cached."""
    from harness.config import load_config
    from harness.train_config import TrainConfig
    from harness.trainer import example_config

    jobs: list[tuple[RunSpec, int, Path, list[str]]] = []
    t0 = time.perf_counter()
    coldstarts: dict[str, Any] = {}
    for seed in cfg.seeds:
        for spec in specs:
            run_dir = out / "runs" / f"{spec.label}-s{seed}"
            ov = run_overrides(cfg, base_path, bank, spec, seed, run_dir)
            tcfg = load_config(TrainConfig, example_config(spec.learner), ov)
            if needs_coldstart(cfg, spec):
                path, built = coldstart(cfg, tcfg, ov, bank, cs_traces, cache)
                coldstarts[spec.label] = {"path": str(path), "cached": not built}
                if built:  # the cold start above named its temporary folder
                    _say(cfg, f"[demo] cold start: {path}")
                ov.append(f"lopd.composer_init={path}")
            jobs.append((spec, seed, run_dir, [f"learner={spec.learner}", *ov]))
    timings["coldstart"] = time.perf_counter() - t0
    return jobs, coldstarts


def _plain(cfg: DemoConfig) -> dict[str, Any]:
    d = asdict(cfg)
    d["base"]["pretrain"]["betas"] = list(d["base"]["pretrain"]["betas"])
    return d


# ---- summary, table, plot ---------------------------------------------------------------------------


def _say(cfg: DemoConfig, msg: str) -> None:
    if cfg.progress:
        print(msg, flush=True)


def copy_config(cfg: DemoConfig, **changes: Any) -> DemoConfig:
    """A deep copy of ``cfg`` with fields replaced."""
    new = copy.deepcopy(cfg)
    for k, v in changes.items():
        setattr(new, k, v)
    return new
