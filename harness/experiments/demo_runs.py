"""Training the demo's runs: each in this process or a spawned worker, a finished run reused when its
spec is unchanged, and each run's curve, behaviour and summary read back for the report
(:func:`harness.experiments.demo.run_pipeline` stages 4 and 5)."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.experiments.demo_report import BEHAVIOUR
from harness.metrics import read_metrics
from harness.prepare.stages import CACHE_VERSION, model_identity, portable_path, progress_bar

if TYPE_CHECKING:
    from harness.experiments.demo_config import DemoConfig



def exit_with_parent(parent: int, every: float = 1.0) -> None:
    """Pool-worker initializer: exit when ``parent`` is gone. A killed parent otherwise leaves its
    workers running the queued runs into run folders that the next attempt is retraining."""
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="exit-with-parent").start()


def _train_one(overrides: list[str], threads: int) -> dict[str, Any]:
    """Train one run (in this process or a worker) and return its trainer summary."""
    import torch

    from harness.training.trainer import train

    if threads > 0:
        torch.set_num_threads(threads)
    cfg = run_config(overrides)
    t0, c0 = time.perf_counter(), time.process_time()
    summary = train(cfg)
    summary = {k: v for k, v in summary.items() if k in ("run_dir", "steps", "generations")}
    summary.update(seconds=round(time.perf_counter() - t0, 2), cpu_seconds=round(time.process_time() - c0, 2))
    return summary


def read_curve(run_dir: Path) -> list[tuple[int, float]]:
    """(generations, eval/reward) points of a run's metrics.jsonl, sorted; later lines win."""
    pts = {int(r["generations"]): float(r["eval/reward"]) for r in read_metrics(run_dir / "metrics.jsonl")
           if "eval/reward" in r and "generations" in r}
    return sorted(pts.items())


def complete(run_dir: Path, cfg: DemoConfig) -> bool:
    """Whether the run's curve reaches the full budget (a run whose logs were lost has no curve)."""
    curve = read_curve(run_dir) if (run_dir / "metrics.jsonl").is_file() else []
    budget = cfg.generations // cfg.rollouts_per_step * cfg.rollouts_per_step  # the trainer's whole steps
    return bool(curve) and curve[-1][0] >= budget


def behaviour(run_dir: Path) -> dict[str, dict[str, float]]:
    """Per-episode means of :data:`BEHAVIOUR` over the eval episodes of the first and last evaluation."""
    from envs.trace import iter_records
    from harness.stats import GroupStats, episode_stats

    by_gen: dict[int, GroupStats] = {}
    for _, ep in iter_records(run_dir / "traces.jsonl", on_error="skip"):
        meta = ep.get("meta") or {}
        if meta.get("phase") != "eval":
            continue
        by_gen.setdefault(int(meta.get("generations", -1)), GroupStats()).add(episode_stats(ep))
    if not by_gen:
        return {}
    out = {}
    for name, g in (("start", min(by_gen)), ("end", max(by_gen))):
        s = by_gen[g].summary()
        out[name] = {"generations": g, **{m: s[m].mean for m in BEHAVIOUR}}
    return out


def _spec_file(run_dir: Path) -> Path:
    return run_dir / "demo_spec.json"


def cached_identity(path: str) -> str:
    """A file the pipeline cached, by its keyed folder on (``bank-<key>/bank``, ``coldstart-<key>/composer.pt``),
    wherever the cache lies; another path as :func:`portable_path` gives it."""
    parts = Path(path).parts
    keyed = [i for i, part in enumerate(parts) if re.fullmatch(r"[a-z0-9]+-[0-9a-f]{16}", part)]
    return "/".join(parts[keyed[-1]:]) if keyed else portable_path(path)


_PORTABLE = {"model.path": model_identity, "bank.path": cached_identity, "lopd.composer_init": cached_identity}
"""Settings that name a file the pipeline built, compared by what it is (a built base's recorded key, a
cached file's keyed folder), not where it lies."""


def same_run(saved: dict[str, Any] | None, want: dict[str, Any]) -> bool:
    """Whether a finished run's saved spec trains the same run as ``want``. Progress bars and the run's
    folder are not part of it, and the built files it names are compared by :data:`_PORTABLE`, so an
    output folder or the cache can be moved, or assembled from links to runs of several comparisons, and
    still be reused. The resolved configs must agree on every key the saved one holds: a changed value (an edited
    packaged file, a new default) retrains; a field added to the code since, absent from the saved config,
    does not."""
    def overrides(spec: dict[str, Any]) -> list[str]:
        out = []
        for o in spec.get("overrides", []):
            key, _, value = o.partition("=")
            if key not in ("log.progress", "run_dir"):
                out.append(f"{key}={_PORTABLE[key](value)}" if key in _PORTABLE else o)
        return out

    def config(spec: dict[str, Any]) -> dict[str, Any]:
        cfg = json.loads(json.dumps(spec.get("config") or {}))
        for dotted, norm in _PORTABLE.items():
            *parents, leaf = dotted.split(".")
            d = cfg
            for k in parents:
                d = d.get(k) if isinstance(d, dict) else None
            if isinstance(d, dict) and isinstance(d.get(leaf), str):
                d[leaf] = norm(d[leaf])
        return cfg

    if not isinstance(saved, dict) or saved.get("version") != want.get("version"):
        return False
    from harness.config import recorded_settings_agree

    return overrides(saved) == overrides(want) and recorded_settings_agree(config(saved), config(want))


def run_config(ov: list[str]) -> Any:
    """The TrainConfig of a run: its learner's packaged config (``learner=NAME`` in ``ov``) with ``ov`` applied."""
    from harness.config import load_config
    from harness.training.train_config import TrainConfig
    from harness.training.trainer import example_config

    learner = next(o.split("=", 1)[1] for o in ov if o.startswith("learner="))
    return load_config(TrainConfig, example_config(learner), [o for o in ov if not o.startswith("learner=")])


def resolved_config(ov: list[str]) -> dict[str, Any]:
    """The run's whole TrainConfig as plain data (:func:`run_config`; the folder and the progress bars left
    out), saved with the run and compared by :func:`same_run`."""
    from harness.config import to_dict

    d = json.loads(json.dumps(to_dict(run_config(ov)), default=str))
    d.pop("run_dir", None)
    d.get("log", {}).pop("progress", None)
    return d


def train_stage(cfg: DemoConfig, jobs: list[tuple], timings: dict[str, float]) -> dict[str, dict[str, Any]]:
    """4. Train every run not already finished with the same spec; returns their trainer summaries
    by run folder."""
    t0 = time.perf_counter()
    todo = runs_to_train(cfg, jobs)
    for _spec, _seed, run_dir, _ov, want in todo:
        run_dir.mkdir(parents=True, exist_ok=True)
        _save_spec(run_dir, want, {})  # before training: a killed run is then known and resumed
    if cfg.jobs > 1 and len(todo) > 1:
        summaries = _train_in_workers(cfg, todo)
    else:
        summaries = {}
        for _spec, _seed, run_dir, ov, want in todo:
            summaries[str(run_dir)] = s = _train_one(ov, cfg.threads)
            _save_spec(run_dir, want, s)
    timings["train"] = time.perf_counter() - t0
    return summaries


def wanted(ov: list[str]) -> dict[str, Any]:
    """The spec a run of overrides ``ov`` records (and is reused by)."""
    return {"version": CACHE_VERSION, "overrides": ov, "config": resolved_config(ov)}


def finished(run_dir: Path, want: dict[str, Any], cfg: DemoConfig) -> bool:
    """Whether ``run_dir`` holds a complete run of the spec ``want``."""
    sf = _spec_file(run_dir)
    return sf.is_file() and same_run(json.loads(sf.read_text()).get("spec"), want) and complete(run_dir, cfg)


def started(run_dir: Path, want: dict[str, Any]) -> bool:
    """Whether ``run_dir`` holds an interrupted run of the spec ``want``: its spec is written before training
    and its summary after, so a run with a summary but no complete curve lost its logs (and is retrained)."""
    sf = _spec_file(run_dir)
    if run_dir.is_symlink() or not sf.is_file():
        return False
    saved = json.loads(sf.read_text())
    return not saved.get("summary") and same_run(saved.get("spec"), want)


def runs_to_train(cfg: DemoConfig, jobs: list[tuple]) -> list[tuple]:
    """The jobs whose folder holds no finished run of the same spec, as ``(*job, want)`` (``want``: the
    spec the run will record); an unfinished run of the same spec is kept (it resumes from its checkpoints),
    a stale folder is deleted (a link to one: the link only)."""
    todo = []
    for spec, seed, run_dir, ov in jobs:
        want = wanted(ov)
        if finished(run_dir, want, cfg):
            continue
        if started(run_dir, want):
            todo.append((spec, seed, run_dir, ov, want))  # the trainer resumes from its last checkpoint
            continue
        if run_dir.is_symlink():
            run_dir.unlink()  # a link to a run of another spec: drop the link, never the run it names
        elif run_dir.exists():
            shutil.rmtree(run_dir)  # a stale or unfinished run of another spec
        todo.append((spec, seed, run_dir, ov, want))
    return todo


def _train_in_workers(cfg: DemoConfig, todo: list[tuple]) -> dict[str, dict[str, Any]]:
    """Train ``todo`` in ``cfg.jobs`` spawned processes, one bar over the runs."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    summaries: dict[str, dict[str, Any]] = {}
    bar = progress_bar(len(todo), "runs", "run", cfg.progress)
    with ProcessPoolExecutor(max_workers=cfg.jobs, mp_context=mp.get_context("spawn"),
                             initializer=exit_with_parent, initargs=(os.getpid(),)) as pool:
        futs = {pool.submit(_train_one, ov, cfg.threads): (run_dir, want) for _, _, run_dir, ov, want in todo}
        for fut in as_completed(futs):
            run_dir, want = futs[fut]
            summaries[str(run_dir)] = s = fut.result()
            _save_spec(run_dir, want, s)
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return summaries


def _save_spec(run_dir: Path, want: dict[str, Any], summary: dict[str, Any]) -> None:
    _spec_file(run_dir).write_text(json.dumps({"spec": want, "summary": summary}, indent=1) + "\n")


def collect_runs(cfg: DemoConfig, jobs: list[tuple],
                 summaries: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """5. Each run's curve, behaviour and summary, for :func:`harness.experiments.demo_report.summarize`."""
    runs = []
    for spec, seed, run_dir, _ov in jobs:
        if not complete(run_dir, cfg):
            raise RuntimeError(f"{run_dir}: its metrics.jsonl lacks the final held-out evaluation; "
                               "delete the folder and run again to retrain it")
        saved = json.loads(_spec_file(run_dir).read_text())
        runs.append({"label": spec.label, "learner": spec.learner, "seed": seed, "overrides": spec.overrides,
                     "run_dir": str(run_dir), "curve": read_curve(run_dir), "behaviour": behaviour(run_dir),
                     "reused": str(run_dir) not in summaries, "summary": saved.get("summary", {})})
    return runs


