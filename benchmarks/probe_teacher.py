"""Probe: how good is each self-teacher as a policy? Held-out reward of the frozen base under the
contexts the learners' teachers see, by real rollouts.

    python benchmarks/probe_teacher.py BASE_DIR --bank BANK_DIR [--composer composer.pt ...]
    python benchmarks/probe_teacher.py --runs RUN_DIR [RUN_DIR ...] [--tasks N --samples K --split val]

Conditions of the first form (each task played ``--samples`` times at the rollout temperature):

* ``none``: the plain prompt (the student before training);
* ``oracle``: the scripted expert's run on another train task of the same template, framed as text
  (what the base was pretrained to use; OPSD's teacher sees a bank trajectory this way);
* ``retrieved``: the top-1 bank experience of the task, framed as text (what retrieval offers);
* ``latent:<file>``: the top-``--retrieve`` bank experiences through a composer (``lopd coldstart``
  output) into latents, spliced into the frozen base, i.e. LOPD's teacher at the start of RL.

A self-distillation teacher can only lift the student as far as its own policy is better than the
student's; a latent teacher that scores like ``none`` carries no usable context. The report also says
how often the top-1 retrieved experience shares the task's template (the retrieval's precision).

The second form (:func:`teacher_advantage`) reads finished LOPD runs: the teacher's advantage over
the student on held-out tasks at the start of training (the base with and without the cold-start
composer's latents) and at its end (the final student, and the base with the trained composer's
latents). Each result is cached in ``RUN_DIR/teacher_probe.json``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import torch

from harness.basemodel.config import make_env
from harness.basemodel.references import good_reference, referenced_prompts
from harness.basemodel.build import load_base_dir

CACHE_FILE = "teacher_probe.json"
"""The file in a run folder that caches :func:`teacher_advantage`'s results, by their arguments."""
CONDITIONS = ("student_start", "teacher_start", "student_end", "teacher_end")
""":func:`teacher_advantage`'s policies, in the order they are played."""


def _micro(env: Any, task_id: str) -> tuple[str, str]:
    m = env.task_by_id(task_id).data["scenario"]["micro"]
    return m["domain"], m["template"]


# ---- shared pieces: retrieval, latents, the latent teacher's prompt, playing --------------------------
def retrieve_hits(bank: Any, tasks: list, env_id: str | None, k: int) -> list[list[Any]]:
    """The bank's top-``k`` hits per task, best first, never the task's own entries (``[]`` rows for
    an empty bank or ``k < 1``)."""
    if not len(bank) or k < 1:
        return [[] for _ in tasks]
    return bank.search([t.prompt for t in tasks], k=k, env=env_id, task_ids=[t.task_id for t in tasks],
                       exclude_self=True)


def compose_latents(composer: Any, tasks: list, exps: dict[str, list[str]]) -> dict[str, torch.Tensor]:
    """Per task id, the latents (``[n_experiences * n_latents, d]``, detached) the composer makes from
    the task and its retrieved experience texts ``exps[task_id]``."""
    composer.eval()
    with torch.no_grad():
        lats = composer.encode([t.prompt for t in tasks], [exps.get(t.task_id, []) for t in tasks])
    return {t.task_id: x.detach() for t, x in zip(tasks, lats)}


def latent_prompts(tok: Any, ids: list[str], latents: dict[str, torch.Tensor], framing: str,
                   template_kwargs: dict[str, Any] | None = None) -> Callable:
    """A ``build_prompt`` for :func:`harness.rollout.rollout` over envs reset to ``ids`` in order: each
    task's latents spliced into its first user message as LOPD's teacher sees them (a task without
    latents, or whose text holds the sentinel, plays the plain prompt, as in training)."""
    from harness.engines import EmbedOverride
    from harness.learners.latent_teacher import latent_teacher_prompt
    from harness.rollout import render_prompt

    queue, kw = iter(ids), dict(template_kwargs or {})

    def build(messages: list[dict[str, Any]]) -> tuple[list[int], Any]:
        lat = latents.get(next(queue))
        if lat is not None and lat.shape[0]:
            prompt = latent_teacher_prompt(tok, SimpleNamespace(messages=messages), lat.shape[0], framing, kw)
            if prompt is not None:
                return prompt[0], EmbedOverride(positions=prompt[1], embeds=lat)
        return render_prompt(tok, messages, **kw), None
    return build


def play_rewards(envs: list, engine: Any, tok: Any, ids: list[str], build: Callable | None, sampling: Any,
                 rcfg: Any, seeds: list[int] | None = None) -> list[float]:
    """Episode rewards of one condition: env ``i`` plays task ``ids[i]`` (``build``: the prompt
    builder, None for the plain prompt)."""
    from harness.rollout import rollout

    trajs = rollout(envs[:len(ids)], engine, tok, sampling=sampling, config=rcfg, seeds=seeds,
                    options=[{"task_id": tid} for tid in ids], build_prompt=build)
    return [float(tr.episode.reward) for tr in trajs]


def _scores(rs: list[float]) -> dict[str, float]:
    return {"reward": round(statistics.fmean(rs), 4),
            "full_pass": round(statistics.fmean(r >= 1.0 for r in rs), 4)}


# ---- form 1: a base, a bank, cold-start composers ---------------------------------------------------
def probe(base_dir: str, bank_dir: str, composers: list[str], n_tasks: int = 60, samples: int = 2,
          retrieve: int = 3, temperature: float = 0.7, composer_overrides: list[str] | None = None,
          embedder: str = "model", seed: int = 0) -> dict[str, Any]:
    """The report dict: ``conditions`` (reward and full-pass rate each), ``top1_same_template``."""
    from harness.config import load_config
    from harness.engines import HFEngine, SamplingParams
    from harness.learners.privileged import HashingEmbedder
    from harness.rollout import RolloutConfig
    from harness.training.train_config import TrainConfig
    from harness.training.trainer import example_config
    from lopd.bank import ExperienceBank
    from lopd.composer import Composer

    model, tok, info = load_base_dir(base_dir)
    bcfg = info["config_obj"]
    env0 = make_env(bcfg, split=None)
    tasks = [t for t in env0.all_tasks() if t.split == "eval"][:n_tasks]
    bank = ExperienceBank.load(Path(bank_dir) / "bank", embedder=HashingEmbedder() if embedder == "hashing" else None)
    env_id = bank.experiences[0].env_id if len(bank) else None
    hits = retrieve_hits(bank, tasks, env_id, retrieve)
    exps = {t.task_id: [h.experience.text for h in row] for t, row in zip(tasks, hits)}
    same = [bool(row) and _micro(env0, row[0].experience.task_id) == _micro(env0, t.task_id) for t, row in zip(tasks, hits)]
    oracle = {t.task_id: good_reference(env0, t.task_id, seed, bcfg.reference_result_chars)[1] for t in tasks}
    engine = HFEngine(model, tok)
    rcfg = RolloutConfig(max_turns=8)
    ids = [t.task_id for t in tasks for _ in range(samples)]
    envs = [make_env(bcfg, split=None, max_steps=8) for _ in ids]

    lcfg = load_config(TrainConfig, example_config("lopd"), list(composer_overrides or [])).lopd  # the composers' settings

    conditions: dict[str, Any] = {"none": None, "oracle": referenced_prompts(tok, ids, oracle),
                                  "retrieved": referenced_prompts(tok, ids, {k: v[0] for k, v in exps.items() if v})}
    for path in composers:
        frozen, _, _ = load_base_dir(base_dir)
        comp = Composer(frozen, tok, lcfg.composer)
        comp.load_trainable_state_dict(torch.load(path, map_location="cpu"))
        lats = compose_latents(comp, tasks, exps)
        conditions[f"latent:{path}"] = latent_prompts(tok, ids, lats, lcfg.framing)

    out: dict[str, Any] = {"tasks": len(tasks), "samples": samples, "temperature": temperature,
                           "top1_same_template": round(sum(same) / len(same), 3), "conditions": {}}
    sampling = SamplingParams(temperature=temperature, top_p=0.95, top_k=20, max_new_tokens=96, seed=seed)
    for name, build in conditions.items():
        out["conditions"][name] = _scores(play_rewards(envs, engine, tok, ids, build, sampling, rcfg))
        print(f"{name:>40s}: reward {out['conditions'][name]['reward']:.3f}  "
              f"full pass {out['conditions'][name]['full_pass']:.3f}", flush=True)
    return out


# ---- form 2: a finished LOPD run ----------------------------------------------------------------------
def _cache_key(n_tasks: int, samples: int, split: str, temperature: float, seed: int) -> str:
    return json.dumps({"tasks": n_tasks, "samples": samples, "split": split,
                       "temperature": float(temperature), "seed": seed}, sort_keys=True)


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(path: Path, key: str, result: dict[str, Any]) -> None:
    data = _read_cache(path)
    data[key] = result
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _device(name: str) -> torch.device:
    from harness.training.trainer import resolve_device

    dev = resolve_device(name)
    return torch.device("cpu" if dev.startswith("cuda") and not torch.cuda.is_available() else dev)


def teacher_advantage(run_dir: str | Path, n_tasks: int = 60, samples: int = 2, split: str = "val",
                      temperature: float = 0.7, seed: int = 0) -> dict[str, Any]:
    """The latent teacher's advantage over the student on held-out tasks, at the start and the end of
    the finished LOPD run in ``run_dir``, by real rollouts.

    The first ``n_tasks`` tasks of ``split`` in the run's world (``env.kwargs``; ``val`` needs
    ``n_val > 0``) are played ``samples`` times each, at ``temperature`` with the run's other sampling
    and rollout settings, with the same seeds under four policies: ``student_start`` (the base, plain
    prompt), ``teacher_start`` (the frozen base reading the cold-start composer's latents of the task's
    top-``lopd.n_retrieved`` bank experiences, never its own), ``student_end`` (the final checkpoint's
    student, plain prompt) and ``teacher_end`` (the frozen base reading the trained composer's latents,
    same bank). Returns ``{"tasks", "samples", "split", "checkpoint", "reward": {condition: mean
    reward}, "advantage_start", "advantage_end"}``; cached in ``run_dir/teacher_probe.json`` by the
    arguments (and the checkpoint), so a second call plays nothing."""
    from harness.training.checkpoint import latest_checkpoint
    from harness.config import load_config
    from harness.training.train_config import TrainConfig

    run_dir = Path(run_dir)
    if n_tasks < 1 or samples < 1:
        raise ValueError(f"n_tasks and samples must be >= 1, got {n_tasks} and {samples}")
    if not (run_dir / "config.yaml").is_file():
        raise FileNotFoundError(f"{run_dir} is not a training run folder (no config.yaml)")
    cfg = load_config(TrainConfig, run_dir / "config.yaml")
    if cfg.learner != "lopd":
        raise ValueError(f"{run_dir} is a {cfg.learner} run; the teacher advantage is measured for LOPD runs")
    ckpt = latest_checkpoint(run_dir)
    if ckpt is None or ckpt == run_dir:
        raise FileNotFoundError(f"{run_dir} has no checkpoint (checkpoints/step_*): is the run finished?")
    key, cache = _cache_key(n_tasks, samples, split, temperature, seed), run_dir / CACHE_FILE
    hit = _read_cache(cache).get(key)
    if isinstance(hit, dict) and hit.get("checkpoint") == ckpt.name:
        return hit
    tasks = _held_out_tasks(cfg, split, n_tasks, run_dir)
    reward = _start_and_end_rewards(cfg, ckpt, tasks, samples, temperature, seed)
    out = {"tasks": len(tasks), "samples": samples, "split": split, "temperature": temperature, "seed": seed,
           "checkpoint": ckpt.name, "reward": reward,
           "advantage_start": round(reward["teacher_start"] - reward["student_start"], 4),
           "advantage_end": round(reward["teacher_end"] - reward["student_end"], 4)}
    _write_cache(cache, key, out)
    return out


def _held_out_tasks(cfg: Any, split: str, n_tasks: int, run_dir: Path) -> list:
    """The first ``n_tasks`` tasks of ``split`` in the run's world; ValueError when it has none."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the lopd/* ids)

    env0 = gym.make(cfg.env.id, **cfg.env.kwargs)
    tasks = [t for t in env0.unwrapped.all_tasks() if t.split == split][:n_tasks]
    if not tasks:
        hint = (" (the micro world has validation tasks only with n_val > 0 in env.kwargs)"
                if split == "val" else "")
        raise ValueError(f"{run_dir}: the world {cfg.env.id} with env.kwargs {cfg.env.kwargs} has no "
                         f"{split!r} tasks{hint}")
    return tasks


def _start_and_end_rewards(cfg: Any, ckpt: Path, tasks: list, samples: int, temperature: float,
                           seed: int) -> dict[str, float]:
    """The mean reward of each of :data:`CONDITIONS` on ``tasks`` (see :func:`teacher_advantage`)."""
    import gymnasium as gym

    from harness.engines import HFEngine, SamplingParams
    from harness.learners.lopd_composer import RANDOM_COMPOSER, check_composer_init
    from harness.learners.privileged import load_bank
    from harness.models import load_model
    from harness.training.trainer import load_student

    lcfg = cfg.lopd
    check_composer_init(lcfg.composer_init)
    device = _device(cfg.model.device)
    ids = [t.task_id for t in tasks for _ in range(samples)]
    seeds = [seed * 1_000_003 + i for i in range(len(ids))]
    envs_ = [gym.make(cfg.env.id, **cfg.env.kwargs) for _ in ids]
    sp = cfg.sampling
    sampling = SamplingParams(temperature=temperature, top_p=sp.top_p, top_k=sp.top_k,
                              max_new_tokens=sp.max_new_tokens, seed=seed)
    kw = dict(cfg.rollout.template_kwargs)

    bank = load_bank(cfg.bank)
    exps = {t.task_id: [h.experience.text for h in row]
            for t, row in zip(tasks, retrieve_hits(bank, tasks, cfg.env.id, lcfg.n_retrieved))}
    base, tok = load_student(cfg, device)
    base.eval()
    init = None if lcfg.composer_init == RANDOM_COMPOSER else lcfg.composer_init
    lat_start, lat_end = _start_and_end_latents(lcfg, init, ckpt, base, tok, tasks, exps, device)

    base_engine = HFEngine(base, tok)
    student, _ = load_model(ckpt / "student", dtype=getattr(torch, cfg.model.dtype), device=device)
    plays = {"student_start": (base_engine, None),
             "teacher_start": (base_engine, latent_prompts(tok, ids, lat_start, lcfg.framing, kw)),
             "student_end": (HFEngine(student, tok), None),
             "teacher_end": (base_engine, latent_prompts(tok, ids, lat_end, lcfg.framing, kw))}
    return _mean_rewards(plays, envs_, tok, ids, sampling, cfg.rollout, seeds)


def _start_and_end_latents(lcfg: Any, init: str | None, ckpt: Path, base: Any, tok: Any, tasks: list,
                           exps: dict[str, list[str]], device: torch.device) -> tuple[dict, dict]:
    """The tasks' latents from the composer as the learner built it (``init``: its cold-start state,
    None for random) and from the run's trained composer (the checkpoint's)."""
    from lopd.composer import Composer

    with torch.random.fork_rng(devices=[]):  # as the learner builds it (the seed matters for `random`)
        torch.manual_seed(lcfg.composer_seed)
        composer = Composer(copy.deepcopy(base), tok, lcfg.composer).to(device)
    if init is not None:
        composer.load_trainable_state_dict(torch.load(init, map_location=device))
    lat_start = compose_latents(composer, tasks, exps)
    composer.load_trainable_state_dict(torch.load(ckpt / "learner.pt", map_location=device)["composer"])
    return lat_start, compose_latents(composer, tasks, exps)


def _mean_rewards(plays: dict[str, tuple[Any, Callable | None]], envs_: list, tok: Any, ids: list[str],
                  sampling: Any, rcfg: Any, seeds: list[int]) -> dict[str, float]:
    """Each condition's mean episode reward; played in :data:`CONDITIONS`' order with the same seeds."""
    reward: dict[str, float] = {}
    with torch.no_grad():
        for name in CONDITIONS:
            engine, build = plays[name]
            rs = play_rewards(envs_, engine, tok, ids, build, sampling, rcfg, seeds)
            reward[name] = round(statistics.fmean(rs), 4)
    return reward


def format_advantage(run_dir: str | Path, res: dict[str, Any]) -> str:
    """One line of :func:`teacher_advantage`'s result."""
    r = res["reward"]
    return (f"{run_dir}: {res['tasks']} {res['split']} tasks x {res['samples']}  "
            f"start: teacher {r['teacher_start']:.3f} student {r['student_start']:.3f} "
            f"advantage {res['advantage_start']:+.3f}  |  end ({res['checkpoint']}): "
            f"teacher {r['teacher_end']:.3f} "
            f"student {r['student_end']:.3f} advantage {res['advantage_end']:+.3f}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", nargs="?", help="a built base folder (holding base_info.json)")
    ap.add_argument("--runs", nargs="+", metavar="RUN_DIR",
                    help="finished LOPD runs: the teacher's advantage over the student at the start and "
                         "the end")
    ap.add_argument("--bank", help="a demo bank folder (holding bank/); needed with BASE")
    ap.add_argument("--composer", nargs="*", default=[], help="cold-start composer files")
    ap.add_argument("--tasks", type=int, default=60)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--split", default="val", help="the held-out split of --runs (val or eval)")
    ap.add_argument("--retrieve", type=int, default=3)
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="TrainConfig overrides of the composers' settings, e.g. lopd.composer.qformer.n_latents=8")
    ap.add_argument("--embedder", default="model", choices=("model", "hashing"), help="the bank's retrieval embedder")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the result here too")
    args = ap.parse_args(argv)
    if args.base is None and not args.runs:
        ap.error("give a BASE folder (with --bank) or --runs RUN_DIR [RUN_DIR ...]")
    if args.base is not None and args.runs:
        ap.error("give either a BASE folder or --runs, not both")
    if args.base is not None and not args.bank:
        ap.error("BASE needs --bank BANK_DIR")
    torch.set_num_threads(1)
    res: Any
    if args.runs:
        res = {}
        for run in args.runs:
            res[run] = teacher_advantage(run, args.tasks, args.samples, args.split, args.temperature,
                                         args.seed)
            print(format_advantage(run, res[run]), flush=True)
    else:
        res = probe(args.base, args.bank, args.composer, args.tasks, args.samples, args.retrieve,
                    args.temperature, args.set, args.embedder, args.seed)
        print(json.dumps(res, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
