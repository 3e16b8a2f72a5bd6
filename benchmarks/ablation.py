"""The paper's LOPD ablation table at micro scale (issue #31): cells of LOPD runs, each cell one command,
resumable from the result files committed under ``benchmarks/results/ablation/``.

    python benchmarks/ablation.py --plan                          # every run of every cell, CPU estimate
    python benchmarks/ablation.py --cell learned_vs_frozen        # train what is missing, 2 runs at a time
    python benchmarks/ablation.py --cell learned_vs_frozen --commit   # git-commit each result as it lands
    python benchmarks/ablation.py --cell learned_vs_frozen --only authors-learned-s3  # a subset (another core)
    python benchmarks/ablation.py --cell learned_vs_frozen --snapshot  # commit the runs in training now
    python benchmarks/ablation.py --table                         # the table, from the committed files only

A result records what determines its run's weights (the pipeline's settings after the recipe's, and the
run's whole resolved TrainConfig without its folders), never a path: a run whose committed result agrees on
every recorded setting is not trained again, on any machine (a setting added to the code since does not
count; a changed value does). Each run trains with the *validation* tasks as its curve (what choices read)
and is then evaluated once on the *test* tasks (what the table reports); its per-step composer diagnostics
go into the result too. A run killed midway resumes from its last checkpoint (every 5 steps); with
``--commit`` that checkpoint is committed too (every 2 hours, and at once with ``--snapshot``;
:mod:`benchmarks.ablation_inflight`), so the run goes on from it in a later session or on another machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.ablation_table import WINNER  # noqa: E402
from benchmarks.commits import committing, exit_on_sigterm  # noqa: E402
from harness.experiments.demo import DemoConfig, RunSpec, copy_config  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "ablation"
RESULT_VERSION = 1
DIAGNOSTICS = ("composer/anchor", "composer/delta", "composer/beta", "composer/kl", "composer/grad_norm",
               "composer/lora_grad_norm", "composer/qformer_grad_norm", "composer/drift_kl", "composer/lora_moved",
               "composer/qformer_moved", "grad_norm", "distill_kl", "no_latent_frac", "composer/skipped_update")
"""Per-step metrics a result keeps (those a run logs)."""
NOT_SETTINGS = ("out", "jobs", "threads", "progress", "seeds", "coldstart_checkpoints", "coldstart_checkpoint_every")
"""Pipeline settings that do not change a run's weights (folders, parallelism, how often it saves)."""


@dataclass
class AblationRun:
    """Runs of one row of a cell: a recipe plus overrides, on some seeds."""

    label: str
    """Row name in the table (unique within the cell)."""
    recipe: str
    """A key of :attr:`AblationProtocol.recipes`."""
    overrides: list[str] = field(default_factory=list)
    """TrainConfig ``key=value`` overrides after the recipe's (e.g. ``lopd.train_composer=false``)."""
    seeds: list[int] = field(default_factory=lambda: [1, 2, 3])
    """Training seeds."""
    composer_seeds: list[int] = field(default_factory=lambda: [0])
    """Cold starts: seed i uses ``composer_seeds[i % len]`` (each its own cached cold start), so cold-start
    variance is inside the row's interval."""
    generations: int | None = None
    """The rollout budget; None: the protocol's ``demo.generations``."""
    diagnostic: bool = False
    """Keep a checkpoint every 10 steps (for drift probes after the run)."""


@dataclass
class Cell:
    """One table of the ablation."""

    name: str
    """The ``--cell`` name."""
    description: str = ""
    """What the cell asks."""
    runs: list[AblationRun] = field(default_factory=list)
    """Its rows."""


@dataclass
class AblationProtocol:
    """The ablation: the pipeline shared by every run, the recipes, the cells in the order they run."""

    demo: DemoConfig = field(default_factory=DemoConfig)
    """Base, bank, cold start, budget and evaluation (``val_tasks`` for the curve, ``eval_tasks`` test tasks)."""
    recipes: dict[str, list[str]] = field(default_factory=dict)
    """Recipe name -> TrainConfig overrides (on top of harness/configs/lopd.yaml)."""
    recipe_demo: dict[str, list[str]] = field(default_factory=dict)
    """Recipe name -> pipeline overrides (``coldstart_steps=1000``, ``bank_render=chat_template``)."""
    cells: list[Cell] = field(default_factory=list)
    """The cells."""
    cpu_minutes_per_1000: float = 31.0
    """Planning estimate: CPU-minutes per 1,000 training generations of an LOPD run here (640 took ~20),
    for a recipe with no committed result that records its timing (:func:`timing`); one that does is
    estimated from its median."""
    commit_every_minutes: float = 60.0
    """With ``--commit``: minutes between commits of the cold-start checkpoints that changed (each commit adds
    a few MB to the repository, so not every save)."""
    inflight_every_minutes: float = 120.0
    """With ``--commit``: minutes between commits of each training run's newest checkpoint and logs, which a
    later start of the run resumes from. Each adds ~25 MB at micro scale (student, its AdamW state, the
    composer and its state), so rarely; ``--snapshot`` commits them at once, before a session ends."""
    winner_guess: str = ""
    """A recipe to train the later cells with before the first cell has chosen one, so that both cores stay
    busy while its last runs train. Their results record the recipe in their settings, so they count only
    if it wins (a result is reused only when its settings agree), and ``--table`` shows a later cell only
    once the winner is chosen. Empty: a later cell waits for the choice."""
    commit_budget_mib: float = 200.0
    """With ``--commit`` or ``--snapshot``: the most the session's commits may weigh (:mod:`benchmarks.commits`)
    before snapshots and cold-start checkpoints stop being committed. A submission over 256 MiB of diffs is
    refused whole, so this leaves room for the code and the results; a result is always committed."""


def load(path: Path, overrides: list[str]) -> AblationProtocol:
    from harness.config import load_config

    proto = load_config(AblationProtocol, path, overrides)
    if proto.winner_guess and proto.winner_guess not in proto.recipes:
        raise ValueError(f"winner_guess {proto.winner_guess!r} is no recipe; known: {sorted(proto.recipes)}")
    for cell in proto.cells:
        unknown = sorted({r.recipe for r in cell.runs} - set(proto.recipes) - {WINNER})
        if unknown:
            raise ValueError(f"cell {cell.name}: unknown recipe(s) {unknown}; known: {sorted(proto.recipes)}")
    return proto


def recipe_config(proto: AblationProtocol, recipe: str, out: Path, gens: int | None) -> DemoConfig:
    """The pipeline settings of one recipe's runs (validation curve; the test tasks come after)."""
    from harness.config import load_config, to_dict

    cfg = copy_config(proto.demo, out=str(out), eval_split="val", eval_tasks=proto.demo.val_tasks, threshold=None)
    cfg = load_config(DemoConfig, None, proto.recipe_demo.get(recipe, []), base=to_dict(cfg))
    cfg.coldstart_checkpoints = str(RESULTS / "coldstarts")  # committed, so that a cold start resumes anywhere
    if gens is not None:
        cfg.generations = gens
    return cfg


def jobs_of(proto: AblationProtocol, cell: Cell) -> list[dict[str, Any]]:
    """Every (row, seed) of ``cell`` with its spec, pipeline settings and key."""
    from harness.experiments.demo_runs import resolved_config

    out = []
    for row in cell.runs:
        recipe = winner(proto) if row.recipe == WINNER else row.recipe
        for i, seed in enumerate(row.seeds):
            cs = row.composer_seeds[i % len(row.composer_seeds)]
            ov = [*proto.recipes[recipe], f"lopd.composer_seed={cs}", *row.overrides]
            # checkpoints every 5 steps, so that a killed run resumes (a diagnostic run keeps every 10th)
            ov += ["checkpoint.every_steps=10", "checkpoint.keep=11"] if row.diagnostic else \
                ["checkpoint.every_steps=5", "checkpoint.keep=1"]
            cfg = recipe_config(proto, recipe, ROOT / "runs" / "ablation" / recipe, row.generations)
            demo = {k: v for k, v in asdict(cfg).items() if k not in NOT_SETTINGS}
            train = resolved_config(["learner=lopd", f"seed={seed}", *ov])
            for k in ("bank", "model"):
                train.pop(k, None)  # filled in by the pipeline from the base and bank the demo settings name
            train.get("lopd", {}).pop("composer_init", None)
            settings = json.loads(json.dumps({"demo": demo, "train": train}, default=str))
            key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
            out.append({"cell": cell.name, "label": row.label, "recipe": recipe, "seed": seed,
                        "composer_seed": cs, "overrides": ov, "cfg": cfg, "key": key, "settings": settings,
                        "spec": RunSpec(f"{row.label}-cs{cs}", "lopd", ov)})
    return out


def winner(proto: AblationProtocol, guess: bool = True) -> str:
    """The recipe whose ``<recipe>-learned`` row of the first cell has the best mean validation AUC over its
    seeds (mean reward over the validation points after 0), from the committed results. Before every seed of
    those rows is done: ``proto.winner_guess`` when ``guess`` and it is set, else ValueError."""
    from benchmarks.ablation_table import cell_results, val_auc

    first = proto.cells[0]
    res = cell_results(RESULTS / first.name)
    scores = {}
    for r in proto.recipes:
        runs = [x for x in res if x["label"] == f"{r}-learned"]
        want = next((len(row.seeds) for row in first.runs if row.label == f"{r}-learned"), 0)
        if not runs or len(runs) < want:
            if guess and proto.winner_guess:
                return proto.winner_guess
            raise ValueError(f"the winning recipe is read from cell {first.name}: run it first "
                             f"({len(runs)} of {want} {r}-learned results)")
        scores[r] = sum(val_auc(x) for x in runs) / len(runs)
    return max(scores, key=scores.get)


def _guessed(proto: AblationProtocol, cell: Cell) -> str | None:
    """The guessed recipe a later cell is planned on, while the first cell has not chosen; else None."""
    if proto.winner_guess and any(row.recipe == WINNER for row in cell.runs):
        try:
            winner(proto, guess=False)
        except ValueError:
            return proto.winner_guess
    return None


def result_path(job: dict[str, Any]) -> Path:
    return RESULTS / job["cell"] / f"{run_name(job)}.json"


def run_dir(job: dict[str, Any]) -> Path:
    """Where the pipeline trains the job's run (``out/runs/<label>-s<seed>``, as :func:`plan_runs` names it)."""
    return Path(job["cfg"].out) / "runs" / f"{job['spec'].label}-s{job['seed']}"


def inflight_path(job: dict[str, Any]) -> Path:
    """Where the job's in-flight snapshot is committed: by its key, so a changed recipe never resumes it."""
    return RESULTS / "inflight" / job["key"]


def same_settings(saved: dict[str, Any], job: dict[str, Any]) -> bool:
    """Whether a result trained ``job``'s run: its recorded settings agree with the job's on every key they
    hold (a setting added to the code since, absent from the record, does not retrain; a changed value does)."""
    from harness.config import recorded_settings_agree

    recorded = saved.get("settings") or {}
    return saved.get("version") == RESULT_VERSION and bool(recorded) and recorded_settings_agree(recorded,
                                                                                                 job["settings"])


def is_done(job: dict[str, Any]) -> bool:
    """Whether the job's own result file holds its run."""
    path = result_path(job)
    return path.is_file() and same_settings(json.loads(path.read_text()), job)


def reusable(job: dict[str, Any]) -> Path | None:
    """A result of the same run under another row or cell (the margin cell's m = 0.05 is cell 1's learned
    row), or None."""
    for path in sorted(RESULTS.glob("*/*.json")):
        if path != result_path(job):
            saved = json.loads(path.read_text())
            if "test" in saved and same_settings(saved, job):
                return path
    return None


def reuse(job: dict[str, Any], commit: bool) -> Path | None:
    """:func:`reusable`'s result copied to the job's own file with its provenance; None when there is none."""
    path = reusable(job)
    if path is None:
        return None
    dst = result_path(job)
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(json.dumps({**json.loads(path.read_text()), "cell": job["cell"], "label": job["label"],
                               "reused_from": str(path.relative_to(RESULTS))}, indent=1, sort_keys=True) + "\n")
    if commit:
        commit_file(dst, f"ablation: {job['cell']} {job['label']} seed {job['seed']} (reused)")
    return dst


def trained_so_far(job: dict[str, Any]) -> tuple[int, str]:
    """Generations the job's run has checkpointed, and where: its committed snapshot or this machine's folder
    (whichever is further on; a resume takes that one)."""
    from benchmarks.ablation_inflight import generations_of

    snap, local = generations_of(inflight_path(job)), generations_of(run_dir(job), snapshot=False)
    if snap < local or snap == 0:
        return local, "on this machine only"
    # a snapshot whose commit the budget skipped is in the working tree alone
    return snap, "committed" if _committed(inflight_path(job)) else "snapshot not committed"


def _committed(path: Path) -> bool:
    """Whether ``path`` is tracked and unchanged since HEAD (never, outside the repository: ``--results``)."""
    from benchmarks.commits import committed_as_is

    return path.is_relative_to(ROOT) and committed_as_is(ROOT, path)


def plan_text(proto: AblationProtocol, cells: list[Cell]) -> str:
    """Every run of ``cells`` with its state, and the hours left: each recipe's measured seconds per
    generation where a committed result records them, else ``cpu_minutes_per_1000``. A run that another row
    or cell shares (the same settings) is counted once."""
    lines, total, planned = [], 0.0, {}
    for cell in cells:
        try:
            jobs = jobs_of(proto, cell)
        except ValueError as e:  # a later cell whose recipe is not chosen yet
            lines.append(f"{cell.name}: not planned yet: {e}")
            continue
        rows, hours, left_gens, n_todo = [], 0.0, 0, 0
        for j in jobs:
            state, gens = _state(j, planned)
            planned.setdefault(j["key"], run_name(j))
            spg = seconds_per_generation(j)
            h = gens * (spg if spg else proto.cpu_minutes_per_1000 * 60 / 1000) / 3600
            hours, left_gens, n_todo = hours + h, left_gens + gens, n_todo + (gens > 0)
            est = f"; ~{h:.1f} h left at the {'measured' if spg else 'assumed'} speed" if gens else ""
            rows.append(f"  {state} {run_name(j)}: {j['label']} seed {j['seed']} cold start {j['composer_seed']} "
                        f"({j['cfg'].generations} gens{est}) key {j['key']}")
        total += hours
        ahead = _guessed(proto, cell)
        lines.append(f"{cell.name}: {len(jobs)} runs, {len(jobs) - n_todo} done or shared, {n_todo} to train "
                     f"({left_gens:,} generations left, ~{hours:.1f} CPU-h) - {cell.description}"
                     + (f" [ahead of the choice, on winner_guess={ahead}: counted only if it wins]" if ahead else ""))
        lines += rows
    lines.append(f"total to train: ~{total:.1f} CPU-h (+ cold starts and evaluations); at 2 runs at a time "
                 f"~{total / 2:.1f} h of wall time")
    return "\n".join(lines)


def _state(job: dict[str, Any], planned: dict[str, str]) -> tuple[str, int]:
    """A run's state in the plan and the generations it has left; ``planned``: key -> the run planned first."""
    if is_done(job):
        return "done", 0
    if (src := reusable(job)) is not None:
        return f"shared ({src.relative_to(RESULTS).with_suffix('')})", 0
    if job["key"] in planned:
        return f"shared ({planned[job['key']]}, planned above)", 0
    done, where = trained_so_far(job)
    gens = job["cfg"].generations
    return (f"in flight ({done} of {gens} gens, {where})", gens - done) if done > 0 else ("todo", gens)


def test_rewards(run_dir: Path, cfg: DemoConfig) -> dict[str, float]:
    """The final student's greedy reward on each of the first ``eval_tasks`` test tasks."""
    from harness.evaluation.evaluate import EvalRunConfig, run_eval
    from harness.training.checkpoint import latest_checkpoint

    spec = json.loads((run_dir / "demo_spec.json").read_text())["spec"]["config"]
    ckpt = latest_checkpoint(run_dir)
    if ckpt is None:
        raise RuntimeError(f"{run_dir}: no checkpoint to evaluate")
    kwargs = dict(spec["env"]["kwargs"])
    out = run_dir / "test_eval"
    ecfg = EvalRunConfig(envs=[spec["env"]["id"]], model=str(ckpt / "student"), out=str(out), split="eval",
                         limit=cfg.eval_tasks, temperature=0.0, max_new_tokens=cfg.max_new_tokens,
                         max_turns=cfg.max_turns, env_kwargs={spec["env"]["id"]: kwargs}, seed=0)
    run_eval(ecfg)
    from envs.trace import iter_records

    return {str(r["task_id"]): float(r["reward"]) for _, r in iter_records(out / "traces.jsonl", on_error="skip")}


def timing(run_dir: Path, threads: int) -> dict[str, Any]:
    """The run's median seconds per training generation and per step's phase (``time/*`` of its steps),
    with the torch threads it ran on: what the plan estimates the recipe's later runs from."""
    from statistics import median

    from harness.metrics import read_metrics

    steps = [r for r in read_metrics(run_dir / "metrics.jsonl") if "time/step" in r and "train/loss" in r]
    if not steps:
        return {}
    per_gen = [r["time/step"] * r["step"] / r["generations"] for r in steps if r.get("generations")]
    phases = sorted({k for r in steps for k in r if k.startswith("time/")})
    return {"threads": threads, "seconds_per_generation": median(per_gen) if per_gen else None,
            "step_median_s": {k[5:]: median(r[k] for r in steps if k in r) for k in phases}}


def seconds_per_generation(job: dict[str, Any]) -> float | None:
    """The median seconds per generation of the committed results of the job's row, else of its recipe (a
    frozen composer's row runs faster than a learned one); None when none records it."""
    from statistics import median

    timed = [r for r in committed_results() if (r.get("timing") or {}).get("seconds_per_generation")]
    for same in (lambda r: r.get("label") == job["label"], lambda r: r.get("recipe") == job["recipe"]):
        got = [r["timing"]["seconds_per_generation"] for r in timed if same(r)]
        if got:
            return median(got)
    return None


def committed_results() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(RESULTS.glob("*/*.json"))]


def diagnostics(run_dir: Path) -> list[dict[str, float]]:
    from harness.metrics import read_metrics

    rows = []
    for r in read_metrics(run_dir / "metrics.jsonl"):
        if "step" in r and any(k.startswith("train/") for k in r):
            rows.append({"step": r["step"], "generations": r.get("generations"),
                         **{k: r[f"train/{k}"] for k in DIAGNOSTICS if f"train/{k}" in r}})
    return rows


def write_result(job: dict[str, Any], run: dict[str, Any], commit: bool) -> Path:
    from harness.stats.bootstrap import task_rewards

    run_dir = Path(run["run_dir"])
    test = test_rewards(run_dir, job["cfg"])
    res = {"version": RESULT_VERSION, "key": job["key"], "settings": job["settings"], "cell": job["cell"],
           "label": job["label"],
           "recipe": job["recipe"], "seed": job["seed"], "composer_seed": job["composer_seed"],
           "overrides": job["overrides"], "generations": job["cfg"].generations,
           "val": {str(g): t for g, t in task_rewards(run_dir / "traces.jsonl").items()},
           "test": test, "test_mean": sum(test.values()) / max(len(test), 1),
           "diagnostics": diagnostics(run_dir), "summary": run.get("summary", {}),
           "timing": timing(run_dir, job["cfg"].threads),
           "commit": subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                                    text=True).stdout.strip(),
           "finished_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    path = result_path(job)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(inflight_path(job), ignore_errors=True)  # the result supersedes it, in the same commit
    if commit:
        commit_file(path, f"ablation: {job['cell']} {job['label']} seed {job['seed']}", inflight_path(job))
    return path


def commit_file(path: Path, message: str, *more: Path, budget_mib: float | None = None,
                reserve: Path | None = None) -> bool:
    """:func:`benchmarks.commits.commit_paths` in this repository (``ROOT``)."""
    from benchmarks.commits import commit_paths

    return commit_paths(ROOT, [path, *more], message, budget_mib, reserve)


def commit_checkpoints(folder: Path, budget_mib: float | None = None) -> None:
    """Commit the cold-start checkpoints in ``folder`` that changed (within ``budget_mib``: :func:`commit_file`)."""
    if folder.is_dir() and commit_file(folder, "ablation: cold-start checkpoints", budget_mib=budget_mib):
        print(f"[ablation] committed the checkpoints in {folder}", flush=True)


def commit_inflight(jobs: list[dict[str, Any]], budget_mib: float | None = None) -> None:
    """Snapshot and commit each job's run that has a checkpoint newer than its committed snapshot
    (:func:`benchmarks.ablation_inflight.snapshot`); also safe beside another process training them. Within
    ``budget_mib`` (:func:`commit_file`), the snapshots' removal by their results counted in."""
    from benchmarks.ablation_inflight import snapshot

    for j in jobs:
        if is_done(j):  # a snapshot its result superseded (one another process's older code left) goes
            shutil.rmtree(inflight_path(j), ignore_errors=True)  # a no-op commit when there was none
            commit_file(inflight_path(j), f"ablation: {run_name(j)} done, its in-flight snapshot removed")
            continue
        step = snapshot(run_dir(j), inflight_path(j))
        if step is not None and commit_file(inflight_path(j), f"ablation: {run_name(j)} in flight, step {step}",
                                            budget_mib=budget_mib, reserve=RESULTS / "inflight"):
            print(f"[ablation] committed {run_name(j)} at step {step} ({inflight_path(j)})", flush=True)


def run_name(job: dict[str, Any]) -> str:
    """A run's name for ``--only``: its row and seed, as its result file is named (``authors-learned-s3``)."""
    return f"{job['label']}-s{job['seed']}"


def selected_jobs(proto: AblationProtocol, cell: Cell, only: list[str] | None = None) -> list[dict[str, Any]]:
    """The cell's jobs, or just those named in ``only`` (:func:`run_name`); a name the cell lacks raises."""
    jobs = jobs_of(proto, cell)
    if only:
        unknown = sorted(set(only) - {run_name(j) for j in jobs})
        if unknown:
            raise ValueError(f"cell {cell.name} has no run(s) {unknown}; its runs: {[run_name(j) for j in jobs]}")
        jobs = [j for j in jobs if run_name(j) in only]
    return jobs


def run_cell(proto: AblationProtocol, cell: Cell, commit: bool, only: list[str] | None = None) -> None:
    """Train every missing run of ``cell`` (per recipe and budget, through the demo pipeline, 2 at a time),
    then evaluate each on the test tasks and write its result. With ``demo.jobs=1`` each run is its own
    pipeline call, so its result is written (and committed) as soon as it has trained. ``only``: train just
    the runs so named (:func:`run_name`), e.g. to keep those whose cold start exists apart from one that
    is still training it; a name the cell does not hold raises. A run with a committed in-flight snapshot
    further on than its own folder resumes from the snapshot."""
    from benchmarks.ablation_inflight import restore
    from harness.experiments.demo import run_pipeline

    todo = [j for j in selected_jobs(proto, cell, only) if not is_done(j) and reuse(j, commit) is None]
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for j in todo:
        groups.setdefault((j["recipe"], j["cfg"].generations), []).append(j)
    for (recipe, gens), jobs in groups.items():
        cfg = jobs[0]["cfg"]
        # one pipeline call per seed list, so each spec trains exactly its own seeds
        by_seed: dict[int, list[dict[str, Any]]] = {}
        for j in jobs:
            by_seed.setdefault(j["seed"], []).append(j)
        batches: dict[tuple, list[dict[str, Any]]] = {}
        for seed, js in by_seed.items():
            if cfg.jobs <= 1:  # one run at a time anyway: each its own call
                batches.update({(j["spec"].label, seed): [j] for j in js})
            else:
                batches.setdefault(tuple(sorted(j["spec"].label for j in js)), []).extend(js)
        for js in batches.values():
            # another process (--only), or an earlier batch of the same run under another row, may have
            # finished it meanwhile
            js = [j for j in js if not is_done(j) and reuse(j, commit) is None]
            if not js:
                continue
            seeds, labels = sorted({j["seed"] for j in js}), sorted({j["spec"].label for j in js})
            specs = list({j["spec"].label: j["spec"] for j in js}.values())
            print(f"[ablation] {cell.name}/{recipe}: {', '.join(labels)} on seeds {seeds} ({gens} generations)",
                  flush=True)
            for j in js:
                if restore(inflight_path(j), run_dir(j)):
                    print(f"[ablation] {run_name(j)}: resumes from the committed {inflight_path(j)}", flush=True)
            rep = run_pipeline(copy_config(cfg, seeds=seeds), specs)
            runs = {(r["label"], r["seed"]): r for r in rep["runs"]}
            for j in js:
                path = write_result(j, runs[(j["spec"].label, j["seed"])], commit)
                print(f"[ablation] wrote {path}", flush=True)


def use_results(folder: Path) -> None:
    """Read and write results in ``folder`` instead (a smoke run's, a scratch copy)."""
    global RESULTS
    RESULTS = folder.resolve()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--protocol", default=str(ROOT / "benchmarks" / "protocols" / "ablation.yaml"))
    ap.add_argument("--cell", action="append", default=[], help="a cell to run (repeatable); default: --plan")
    ap.add_argument("--plan", action="store_true", help="print every run and the estimate, train nothing")
    ap.add_argument("--table", action="store_true",
                    help="print the table from the committed result files and plot each cell's diagnostics")
    ap.add_argument("--commit", action="store_true", help="git-commit each result file as soon as it is written")
    ap.add_argument("--only", nargs="*", default=[], metavar="RUN",
                    help="train only these runs of the cell (row-sSEED, as --plan and the result files name them)")
    ap.add_argument("--snapshot", action="store_true",
                    help="commit the cell's runs in training now (their newest checkpoints and logs), to go on "
                         "from in a later session; another process may be training them")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="protocol overrides")
    ap.add_argument("--results", help="the result folder (default: benchmarks/results/ablation, committed)")
    args = ap.parse_args(argv)
    if args.results:
        use_results(Path(args.results))
    proto = load(Path(args.protocol), args.set)
    names = {c.name: c for c in proto.cells}
    unknown = [c for c in args.cell if c not in names]
    if unknown:
        ap.error(f"unknown cell(s) {unknown}; known: {list(names)}")
    if args.table:
        from benchmarks.ablation_table import counted_results, plot_diagnostics, table_markdown

        try:
            chosen = winner(proto, guess=False)
        except ValueError:
            chosen = None
        print(table_markdown(proto, RESULTS, chosen))
        for cell in proto.cells:  # a later cell's plot, like its table, waits for the first cell's choice
            res = counted_results(cell, RESULTS, chosen)
            png = res and plot_diagnostics(RESULTS / cell.name, RESULTS / cell.name / "diagnostics.png", res)
            if png:
                print(f"plot: {png}")
        return 0
    if (args.only or args.snapshot) and not args.cell:
        ap.error("--only and --snapshot need --cell")
    cells = [names[c] for c in args.cell] or proto.cells
    try:
        jobs = [j for cell in [names[c] for c in args.cell] for j in selected_jobs(proto, cell, args.only)]
    except ValueError as e:
        ap.error(str(e))
    if args.snapshot:
        commit_inflight(jobs, proto.commit_budget_mib)
        commit_checkpoints(RESULTS / "coldstarts", proto.commit_budget_mib)
        return 0
    print(plan_text(proto, cells), flush=True)
    if args.plan or not args.cell:
        return 0
    if args.commit:
        exit_on_sigterm()
    budget = proto.commit_budget_mib
    with committing(proto.commit_every_minutes * 60, args.commit,
                    lambda: commit_checkpoints(RESULTS / "coldstarts", budget)), \
            committing(proto.inflight_every_minutes * 60, args.commit, lambda: commit_inflight(jobs, budget)):
        for cell in cells:
            run_cell(proto, cell, args.commit, args.only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
