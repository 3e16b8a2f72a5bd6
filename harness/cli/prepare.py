"""``lopd prepare CONFIG [key=value ...]``: build what an LOPD run (or an OPSD run with a bank oracle) on
the micro world needs before ``lopd train``, and write it where the config points::

    lopd prepare harness/configs/lopd.yaml      # writes runs/bank and runs/lopd/composer_coldstart.pt
    lopd train harness/configs/lopd.yaml

The stages are :mod:`harness.prepare.stages` (the demo runs the same), cached under ``$LOPD_CACHE_DIR/demo`` and shared with
``lopd demo`` when the settings agree:

1. the base: the config's ``model.path``, a built micro base (``micro:pinned``: the pinned one);
2. the bank: the base plays ``--bank-tasks`` training tasks once each (the config's temperature, turn
   length and turn count); its successful episodes are the bank (no scripted-expert episode is added);
3. LOPD only: the base plays ``--coldstart-tasks`` training tasks with its top-1 bank experience (never
   its own) as a text reference, and the composer is warmed on the successes (``lopd.coldstart``'s steps,
   batch size and lr: 200 of 8 at 1e-4 in the packaged config; ``--coldstart-steps`` changes the steps).
   None with ``lopd.composer_init=random``.

The bank goes to ``bank.path`` and the composer to ``lopd.composer_init``; where the config leaves one
unset, to ``RUN_DIR/bank`` or ``RUN_DIR/composer_coldstart.pt``, and the ``lopd train`` command printed at
the end sets it. A file or folder already there is kept when it is the same, and replaced only with
``--force``. The episodes of stages 2 and 3 are printed too: they count toward the run's budget.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shlex
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any


def register(subparsers: argparse._SubParsersAction) -> None:
    from harness.config import arg_type

    stages = "harness.prepare.stages:StageConfig"  # the flags share its fields' rules
    p = subparsers.add_parser("prepare", help="build an LOPD/OPSD run's bank and cold-start composer (micro world)")
    p.add_argument("config", nargs="?", help="the train config (e.g. harness/configs/lopd.yaml)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, as given to lopd train")
    p.add_argument("--bank-tasks", type=arg_type(stages, "bank_tasks"), default=600,
                   help="training tasks the base plays to fill the bank (default 600: all of them)")
    p.add_argument("--coldstart-tasks", type=arg_type(stages, "coldstart_tasks"), default=600,
                   help="training tasks the base plays with a text reference for the cold start (default 600)")
    p.add_argument("--coldstart-steps", type=arg_type("lopd.config:ColdStartConfig", "steps"), default=None,
                   help="cold-start steps (default: the config's lopd.coldstart.steps)")
    p.add_argument("--coldstart-source", choices=["referenced", "base"], default="referenced",
                   help="the cold start's trajectories: the base's rollouts with a text reference (default), or the "
                        "bank's own base successes (the paper's and the authors' pairs; lopd_authors.yaml)")
    p.add_argument("--force", action="store_true", help="replace a bank or composer that differs from the built one")
    p.set_defaults(func=run)


def check_prepared(cfg: Any, prepare: str) -> None:
    """Raise, naming the command ``prepare``, when the run of ``cfg`` lacks its bank or composer."""
    from harness.learners.lopd_composer import check_composer_init
    from harness.learners.privileged import run_inputs

    bank, composer = run_inputs(cfg)
    if composer:
        check_composer_init(cfg.lopd.composer_init, prepare)
    if bank and cfg.bank.path and not Path(cfg.bank.path).exists():
        raise FileNotFoundError(f"no experience bank at {cfg.bank.path} (bank.path): run `{prepare}` "
                                "(builds the bank and, for LOPD, the cold-start composer)")


def _base_folder(cfg: Any) -> str:
    """The built base folder of ``cfg.model.path`` (``micro:pinned`` resolved)."""
    from harness.models.pinned import resolve_model_path

    path = resolve_model_path(cfg.model.path)
    if not (Path(path) / "base_info.json").is_file():
        raise ValueError(f"model.path={cfg.model.path} is not a built micro base (no {Path(path) / 'base_info.json'}); "
                         "lopd prepare plays the base on the micro world: use micro:pinned")
    return path


def _check_world(cfg: Any, base: Any) -> None:
    """The config's env must be the world the base was trained for."""
    from harness.basemodel.config import env_kwargs

    want = env_kwargs(base.config)
    got = {k: cfg.env.kwargs.get(k) for k in want}
    if cfg.env.id != "lopd/micro-v0" or got != want:
        raise ValueError(f"the base at {base.path} was trained for lopd/micro-v0 with {want}; the config has "
                         f"env.id={cfg.env.id}, env.kwargs={dict(cfg.env.kwargs)}: set env.kwargs={json.dumps(want)}")


def _as_overrides(cfg: Any, bank: Path) -> list[str]:
    """``cfg`` as top-level ``key=<json>`` overrides (what the demo's cold start loads), reading ``bank``."""
    from harness.config import to_dict

    d = to_dict(cfg)
    d["bank"].update(path=str(bank / "bank"), traces=[], grow=False)
    return [f"{k}={json.dumps(v)}" for k, v in d.items() if k != "run_dir"]


def _same_tree(a: Path, b: Path) -> bool:
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    if filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)[1:] != ([], []):
        return False
    return all(_same_tree(a / d, b / d) for d in cmp.common_dirs)


def _install(src: Path, dst: Path, force: bool) -> str:
    """Copy file or folder ``src`` to ``dst``, whole or not at all. Returns what happened."""
    same = dst.exists() and (_same_tree(src, dst) if src.is_dir() and dst.is_dir()
                             else src.is_file() and dst.is_file() and filecmp.cmp(src, dst, shallow=False))
    if same:
        return "up to date"
    if dst.exists() and not force:
        raise ValueError(f"{dst} exists and differs from the one built; pass --force to replace it, "
                         "or point the config elsewhere")
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".prepare-", dir=dst.parent))
    try:
        staged = tmp / dst.name
        if src.is_dir():
            shutil.copytree(src, staged)
        else:
            shutil.copy2(src, staged)
        replaced = dst.exists()
        if dst.is_dir():
            shutil.rmtree(dst)
        os.replace(staged, dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return "replaced" if replaced else "written"


def _prepare_composer(cfg: Any, dcfg: Any, base: Any, bank: Path, cache: Path, timings: dict,
                      force: bool) -> tuple[str, int, Path]:
    """Stage 3: the referenced rollouts and the cold start, installed at ``lopd.composer_init`` (or
    ``RUN_DIR/composer_coldstart.pt``); returns (report line, episodes played, where it went)."""
    from harness.prepare.stages import coldstart, coldstart_pairs_stage

    referenced = dcfg.coldstart_source == "referenced"
    pairs = f"the base plays {dcfg.coldstart_tasks} tasks with a text reference" if referenced else \
        "the bank's successful base episodes are the pairs"
    print(f"[prepare] 3/3 cold start: {pairs}, then {dcfg.coldstart_steps} composer steps of {dcfg.coldstart_batch}",
          flush=True)
    traces, cs_info = coldstart_pairs_stage(base, dcfg, bank, cache, timings)
    composer, built = coldstart(dcfg, cfg, _as_overrides(cfg, bank), bank, traces, cache)
    dst = Path(cfg.lopd.composer_init) if cfg.lopd.composer_init else Path(cfg.run_dir) / "composer_coldstart.pt"
    source = f"{cs_info['successes']} referenced successes" if referenced else "the bank's base successes"
    return (f"cold-start composer ({source}, {'built' if built else 'cached'}) -> {dst} "
            f"({_install(composer, dst, force)})", int(cs_info.get("episodes", 0)), dst)


def run(args: argparse.Namespace) -> int:
    from envs.micro.world import cache_root
    from harness.config import config_and_overrides
    from harness.learners.lopd_composer import RANDOM_COMPOSER
    from harness.learners.privileged import run_inputs
    from harness.prepare.stages import StageConfig, bank_stage, base_stage
    from harness.training.train_config import load_train_config

    path, overrides = config_and_overrides(args.config, args.overrides)
    cfg = load_train_config(path, overrides)  # as lopd train resolves it (the model folder's defaults too)
    want_bank, want_composer = run_inputs(cfg)
    if not want_bank:
        raise ValueError(f"learner {cfg.learner} reads no bank: lopd prepare is for LOPD and for OPSD with a bank "
                         "oracle (opsd.oracle=bank or bank_then_reference)")
    want_composer = want_composer and cfg.lopd.composer_init != RANDOM_COMPOSER
    cs = cfg.lopd.coldstart
    steps = args.coldstart_steps if args.coldstart_steps is not None else cs.steps
    base_path = _base_folder(cfg)
    run_dir, extra = Path(cfg.run_dir), []
    bank_dst = Path(cfg.bank.path) if cfg.bank.path else run_dir / "bank"
    if not cfg.bank.path:
        extra.append(f"bank.path={bank_dst}")
    dcfg = StageConfig(min_bank=0, bank_tasks=args.bank_tasks,
                      bank_temperature=cfg.sampling.temperature, max_new_tokens=cfg.sampling.max_new_tokens,
                      max_turns=cfg.rollout.max_turns, embedder=cfg.bank.embedder,
                      bank_min_reward=cfg.bank.config.min_reward, bank_render=cfg.bank.config.render,
                      bank_embed_text=cfg.bank.config.embed_text,
                      coldstart_source=args.coldstart_source,
                      coldstart_tasks=args.coldstart_tasks, coldstart_steps=steps, coldstart_batch=cs.batch_size,
                      coldstart_lr=cs.lr, progress=cfg.log.progress)
    t0, timings = time.perf_counter(), {}
    cache = cache_root() / "demo"
    print(f"[prepare] 1/3 base: {cfg.model.path} ({base_path})", flush=True)
    base = base_stage(dcfg, timings, path=base_path)
    _check_world(cfg, base)
    print(f"[prepare] 2/3 bank: the base plays {dcfg.bank_tasks} training tasks (cache {cache})", flush=True)
    bank, bank_info = bank_stage(base, dcfg, cache, timings)
    if not bank_info["entries"]:
        raise ValueError(f"the base solved none of the {bank_info['base_episodes']} bank tasks: the bank would be "
                         "empty (raise --bank-tasks)")
    episodes = {"bank": bank_info["base_episodes"]}
    done = [f"bank: {bank_info['entries']} experiences -> {bank_dst} ({_install(bank / 'bank', bank_dst, args.force)})"]
    if want_composer:
        line, episodes["cold start"], dst = _prepare_composer(cfg, dcfg, base, bank, cache, timings, args.force)
        done.append(line)
        if not cfg.lopd.composer_init:
            extra.append(f"lopd.composer_init={dst}")
    else:
        why = "lopd.composer_init=random" if run_inputs(cfg)[1] else f"{cfg.learner} has no composer"
        print(f"[prepare] 3/3 cold start: none ({why})")
    for line in done:
        print(f"[prepare] {line}")
    total = sum(episodes.values())
    print(f"[prepare] episodes generated: {' + '.join(f'{v} {k}' for k, v in episodes.items())} = {total}; they "
          f"count toward the run's total budget, on top of its generations={cfg.generations} "
          f"({time.perf_counter() - t0:.0f}s)")
    cmd = ["lopd", "train", *([path] if path else []), *overrides, *extra]
    print(f"next: {shlex.join(cmd)}")
    return 0
