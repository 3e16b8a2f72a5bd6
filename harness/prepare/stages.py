"""The stages before training on the micro world, shared by ``lopd prepare`` and the demo/comparison:

1. the base (:func:`base_stage`): a built base folder as it is, or the cached base of a config;
2. the bank (:func:`bank_stage`): the base plays training tasks once each; its successful episodes fill the
   experience bank (topped up by the scripted expert's when fewer than ``min_bank`` succeed);
3. the cold start: the trace files its pairs come from (:func:`coldstart_pairs_stage`: the bank's episodes, or
   the base's successes when given its top-1 bank experience as text) and the warmed composer
   (:func:`coldstart`, as ``lopd coldstart``).

Each is cached under ``$LOPD_CACHE_DIR/demo`` by what determines it (settings and the base's key), so the demo,
the comparison and ``lopd prepare`` share them when their settings agree. The base's config is read once, by
:func:`base_stage`, and handed to the later stages::

    settings, timings = StageConfig(bank_tasks=50, embedder="hashing"), {}
    base = base_stage(settings, timings, path="harness/pinned_base")
    bank, info = bank_stage(base, settings, cache_root() / "demo", timings)
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from harness.atomic_dir import build_dir
from harness.config import Fraction, NonNegFloat, NonNegInt, PosFloat, PosInt, check_fields
from harness.basemodel.config import BaseModelConfig, env_kwargs
from lopd.latent import framing_text

__all__ = ["Base", "StageConfig", "bank_stage", "base_stage", "coldstart", "coldstart_pairs_stage", "env_kwargs"]

CACHE_VERSION = 2
"""Bump to invalidate every cached bank, cold-start composer and finished run (when the code that
makes them changes; the keys hold the settings and the base's key, not this file's text)."""


@dataclass
class StageConfig:
    """The stages' settings (the demo's and the comparison's :class:`~harness.experiments.demo.DemoConfig`
    extends it; ``lopd prepare`` fills it from a train config)."""

    max_new_tokens: PosInt = 96
    """Tokens per assistant turn (training, evaluation and the bank rollouts)."""
    max_turns: PosInt = 8
    """Assistant turns per episode (every micro-world procedure ends within 6)."""
    bank_tasks: PosInt = 200
    """Training tasks the base plays once each (temperature ``bank_temperature``) to fill the bank (the
    comparison plays all 600, so that every procedure has a chance to be in it; the demo a third)."""
    bank_temperature: NonNegFloat = 0.7
    """Sampling temperature of the bank rollouts (the training rollouts' temperature)."""
    min_bank: NonNegInt = 0
    """When fewer successful base episodes than this exist, the scripted expert's episodes on training
    tasks top the bank up to this size (reported as ``bank.expert``, data the base did not generate).
    0 (the default) never adds any."""
    embedder: Literal["model", "hashing"] = "model"
    """Bank retrieval embeddings: the bank's MiniLM model, or the lexical hashing embedder (no model)."""
    bank_min_reward: Fraction = 1.0
    """Episodes of the bank rollouts that enter the bank: reward >= this (1.0: full passes; the
    authors' bank builder: 0.0, failures too)."""
    bank_render: Literal["lite", "chat_template"] = "lite"
    """An experience's text (:attr:`lopd.bank.BankConfig.render`; ``chat_template`` uses the base's)."""
    bank_embed_text: Literal["task", "task_trajectory"] = "task_trajectory"
    """What a bank entry's vector encodes (:attr:`lopd.bank.BankConfig.embed_text`; authors: ``task``)."""
    coldstart_source: Literal["base", "referenced"] = "referenced"
    """Trajectories the cold start teaches the latents to predict. ``base``: the bank's successful base
    episodes (the paper's recipe; at micro scale the base predicts its own successes at ~0.01 nats a
    token, so the latents learn to stay out of the way and carry nothing). ``referenced``: successful
    episodes of the base given the task's top-1 bank experience as a text reference, which include
    tasks it fails alone; the latents must then carry what the text carried."""
    coldstart_tasks: PosInt = 100
    """Training tasks the base plays with a text reference for ``coldstart_source=referenced`` (the
    comparison plays all 600)."""
    coldstart_steps: NonNegInt = 20
    """Composer cold-start steps (LOPD runs). On the r14 base the latent teacher's held-out reward
    grows with them: 0.30 without context, 0.37 after 40 steps of 4, 0.48 after 200 of 8, against
    0.55 with the same top-1 experience as text (docs/MICRO.md); the demo's 20 of 8 fit its 10 minutes (its LOPD run checks the pipeline, not the method),
    the comparison runs 200 of 8."""
    coldstart_batch: PosInt = 8
    """Cold-start pairs per step."""
    coldstart_lr: PosFloat = 1e-4
    """Cold-start learning rate (the paper's 1e-5 is for 4B-8B backbones)."""
    coldstart_checkpoints: str = ""
    """Folder of resumable cold-start checkpoints, one ``coldstart-<key>.pt`` each, saved every
    ``coldstart_checkpoint_every`` steps and kept when finished (a folder in the repository lets a long cold
    start go on from a commit on another machine); empty: beside the cached composer."""
    coldstart_checkpoint_every: NonNegInt = 50
    """Cold-start steps between checkpoints (0: none until it finishes)."""
    progress: bool = True
    """tqdm progress bars."""

    def __post_init__(self) -> None:
        check_fields(self)  # lopd prepare builds one from a train config and flags


@dataclass
class Base:
    """A loaded base: its model, tokenizer, config (read once, from its folder or as built) and build record."""

    model: Any
    """The causal LM (a Hugging Face model)."""
    tokenizer: Any
    """Its tokenizer."""
    config: BaseModelConfig
    """What it was made of: its world (``env_kwargs``) and its references' cut (``reference_result_chars``)."""
    info: dict[str, Any]
    """Its ``base_info.json`` plus ``path``, ``cached`` and ``pinned``."""

    @property
    def path(self) -> str:
        """The base's folder."""
        return self.info["path"]


def _key(*parts: Any) -> str:
    blob = json.dumps([CACHE_VERSION, *parts], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def portable_path(path: str | Path) -> str:
    """A path as a key holds it: relative to the cache root or the repository when inside one (their folder
    names hold their own keys), so that a key does not change with where the cache or the checkout is."""
    from envs.micro.world import cache_root

    p = Path(path).expanduser().resolve()
    for root in (cache_root().resolve(), Path(__file__).resolve().parents[2]):
        if p.is_relative_to(root):
            return p.relative_to(root).as_posix()
    return str(path)


def model_identity(path: str | Path) -> str:
    """What a model path stands for in a cache key: a built base's recorded key
    (:func:`harness.models.identity.recorded_base_key`), as the bank's key holds it, else the path as
    :func:`portable_path` gives it."""
    from harness.models.identity import recorded_base_key

    key = recorded_base_key(path)
    return f"base:{key}" if key else portable_path(path)


def _play(base: Base, cfg: StageConfig, ids: list[str], out: Path, desc: str, phase: str,
          references: dict[str, str] | None = None) -> tuple[int, int]:
    """The base plays each training task of ``ids`` once (temperature ``bank_temperature``), with
    ``references[task_id]`` framed into its first user message when given; every episode goes to
    ``out`` (traces). Returns (episodes, successes)."""
    import gymnasium as gym

    import envs  # noqa: F401
    from envs.trace import TraceWriter
    from harness.basemodel.references import referenced_prompts
    from harness.engines import HFEngine, SamplingParams
    from harness.rollout import RolloutConfig, rollout

    kw, tok = env_kwargs(base.config), base.tokenizer
    engine = HFEngine(base.model, tok)
    batch = 32
    envs_ = [gym.make("lopd/micro-v0", max_steps=cfg.max_turns, **kw) for _ in range(min(batch, len(ids)))]
    bar = progress_bar(len(ids), desc, "ep", cfg.progress)
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


def _train_tasks(base: BaseModelConfig, n: int) -> list[Any]:
    """The first ``n`` training tasks of the base's world."""
    import gymnasium as gym

    import envs  # noqa: F401

    env0 = gym.make("lopd/micro-v0", **env_kwargs(base)).unwrapped
    return [t for t in env0.all_tasks() if t.split == "train"][:n]


def _embedder(cfg: StageConfig) -> Any:
    """The bank's retrieval embedder of ``cfg.embedder`` (None: the bank's own model)."""
    from harness.learners.privileged import HashingEmbedder

    return HashingEmbedder() if cfg.embedder == "hashing" else None


def _expert_episodes(base: BaseModelConfig, n: int, out: Path) -> int:
    """The scripted expert's correct procedure on ``n`` training tasks (from the end of the split)."""
    import gymnasium as gym

    import envs  # noqa: F401
    from envs.micro.expert import run_solver
    from envs.trace import Episode, TraceWriter

    env = gym.make("lopd/micro-v0", **env_kwargs(base)).unwrapped
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


def bank_config(base: Base, cfg: StageConfig) -> Any:
    """The bank's settings: results cut where the base's pretraining references cut them, so the
    bank's experiences read exactly like the references the base learnt to use; a chat-template
    rendering uses the base's own template."""
    from lopd.bank import BankConfig

    chat = cfg.bank_render == "chat_template"
    return BankConfig(observation_chars=base.config.reference_result_chars, min_reward=cfg.bank_min_reward,
                      render=cfg.bank_render, template_tokenizer=base.path if chat else None,
                      embed_text=cfg.bank_embed_text)


def bank_key(cfg: StageConfig, base_info: dict[str, Any]) -> str:
    # the defaults' key is the one from before these two settings existed (caches stay valid)
    extra = [cfg.bank_min_reward, cfg.bank_render, cfg.bank_embed_text]
    extra = [] if extra == [1.0, "lite", "task_trajectory"] else extra
    return _key("bank", base_info["key"], cfg.bank_tasks, cfg.bank_temperature, cfg.min_bank, cfg.embedder,
                cfg.max_new_tokens, cfg.max_turns, *extra)


def sources_at(bank: Any, tmp: Path, target: Path) -> None:
    """Point the sources of ``bank``'s experiences read from files under ``tmp`` to ``target``, the
    folder :func:`~harness.atomic_dir.build_dir` renames ``tmp`` to: the temp path is gone once built."""
    old, new = str(tmp.resolve()), str(target.resolve())
    bank.experiences[:] = [replace(e, source=replace(e.source, file=new + e.source.file[len(old):]))
                           if e.source.file.startswith(old + "/") else e for e in bank.experiences]


def build_bank_dir(base: Base, cfg: StageConfig, cache: Path) -> tuple[Path, dict]:
    """The cached bank folder (``bank/``, ``base_traces.jsonl``, ``expert_traces.jsonl``, ``info.json``)."""
    target = cache / f"bank-{bank_key(cfg, base.info)}"

    def build(tmp: Path) -> None:
        from lopd.bank import ExperienceBank

        t0 = time.perf_counter()
        ids = [t.task_id for t in _train_tasks(base.config, cfg.bank_tasks)]
        played, ok = _play(base, cfg, ids, tmp / "base_traces.jsonl", "bank: base rollouts", "bank")
        expert = _expert_episodes(base.config, max(0, cfg.min_bank - ok), tmp / "expert_traces.jsonl")
        bank = ExperienceBank.build([tmp / "base_traces.jsonl", tmp / "expert_traces.jsonl"],
                                    config=bank_config(base, cfg), embedder=_embedder(cfg))
        sources_at(bank, tmp, target)
        bank.save(tmp / "bank")
        info = {"base_episodes": played, "base_successes": ok, "expert": expert, "entries": len(bank),
                "seconds": round(time.perf_counter() - t0, 2)}
        (tmp / "info.json").write_text(json.dumps(info, indent=1) + "\n")

    built = build_dir(target, build, "DONE")
    info = json.loads((target / "info.json").read_text())
    info.update(path=str(target), cached=not built)
    return target, info


def coldstart_traces_dir(base: Base, cfg: StageConfig, bank: Path, cache: Path) -> tuple[Path, dict]:
    """The cached folder of the base's referenced episodes (``traces.jsonl``, ``info.json``): each of
    ``coldstart_tasks`` training tasks played once with its top-1 bank experience (never its own) framed
    in as a text reference."""
    target = cache / f"cstraces-{_key('cstraces', portable_path(bank), cfg.coldstart_tasks, cfg.bank_temperature)}"

    def build(tmp: Path) -> None:
        from lopd.bank import ExperienceBank

        t0 = time.perf_counter()
        tasks = _train_tasks(base.config, cfg.coldstart_tasks)
        lib = ExperienceBank.load(bank / "bank", embedder=_embedder(cfg))
        hits = lib.search([t.prompt for t in tasks], k=1, env="lopd/micro-v0", task_ids=[t.task_id for t in tasks])
        refs = {t.task_id: row[0].experience.text for t, row in zip(tasks, hits) if row}
        played, ok = _play(base, cfg, list(refs), tmp / "traces.jsonl", "cold start: referenced rollouts",
                           "coldstart", references=refs)
        info = {"episodes": played, "successes": ok, "seconds": round(time.perf_counter() - t0, 2)}
        (tmp / "info.json").write_text(json.dumps(info, indent=1) + "\n")

    built = build_dir(target, build, "DONE")
    info = json.loads((target / "info.json").read_text())
    info.update(path=str(target), cached=not built)
    return target, info


def coldstart_key(cfg: StageConfig, train_cfg: Any, bank: Path, traces: list[Path]) -> str:
    """Everything a cold start reads: the bank, the pairs, the composer, its training settings (the demo's
    steps, batch and lr over the run's ``lopd.coldstart``), its seed, the base model and its dtype; not the
    run's seed."""
    lo = train_cfg.lopd
    settings = replace(lo.coldstart, steps=cfg.coldstart_steps, batch_size=cfg.coldstart_batch,
                       lr=cfg.coldstart_lr)
    # the default dtype's key is the one from before the dtype was in it (committed cold starts stay valid)
    dtype = [] if train_cfg.model.dtype == "float32" else [train_cfg.model.dtype]
    return _key("coldstart", portable_path(bank), [portable_path(t) for t in traces], asdict(lo.composer),
                asdict(settings), lo.n_retrieved, lo.allow_self_retrieval, framing_text(lo.framing), lo.composer_seed,
                model_identity(train_cfg.model.path), *dtype)


def coldstart(cfg: StageConfig, train_cfg: Any, overrides: list[str], bank: Path, traces: list[Path],
              cache: Path) -> tuple[Path, bool]:
    """The cold-start composer file for this run's composer settings (built once, then cached; resumed from
    its checkpoint in ``cfg.coldstart_checkpoints`` when one is there)."""
    name = f"coldstart-{coldstart_key(cfg, train_cfg, bank, traces)}"
    target = cache / name
    ckpt = Path(cfg.coldstart_checkpoints or cache) / f"{name}.pt"

    def build(tmp: Path) -> None:
        from harness.config import load_config
        from harness.training.coldstart import run_coldstart
        from harness.training.train_config import TrainConfig

        ov = [o for o in overrides if not o.startswith(("run_dir=", "lopd.composer_init="))]
        ov += [f"run_dir={tmp}", f"lopd.coldstart.steps={cfg.coldstart_steps}",
               f"lopd.coldstart.batch_size={cfg.coldstart_batch}", f"lopd.coldstart.lr={cfg.coldstart_lr}",
               f"log.progress={str(cfg.progress).lower()}"]
        run_coldstart(load_config(TrainConfig, None, ov), [str(t) for t in traces], tmp / "composer.pt",
                      ckpt, cfg.coldstart_checkpoint_every)

    built = build_dir(target, build, "DONE")
    if not cfg.coldstart_checkpoints:
        ckpt.unlink(missing_ok=True)  # the cached composer holds it now
    return target / "composer.pt", built


def base_stage(cfg: StageConfig, timings: dict[str, float], *, config: BaseModelConfig | None = None,
               path: str | None = None) -> Base:
    """1. The base: the built folder ``path`` as it is (its recorded config), else the cached base of ``config``
    (the defaults when None), built on a miss."""
    from harness.basemodel.build import load_base_dir, load_or_build_base

    t0 = time.perf_counter()
    if path:
        model, tok, info = load_base_dir(path)
        config = info.pop("config_obj")
    else:
        config = config or BaseModelConfig()
        model, tok, info = load_or_build_base(config, progress=cfg.progress)
    timings["base"] = time.perf_counter() - t0
    how = "pinned" if info.get("pinned") else "cached" if info["cached"] else "built"
    say(cfg, f"[demo] base model {info['path']} ({how}, {timings['base']:.0f}s)")
    return Base(model, tok, config, info)


def bank_stage(base: Base, cfg: StageConfig, cache: Path, timings: dict[str, float]) -> tuple[Path, dict[str, Any]]:
    """2. The bank folder (:func:`build_bank_dir`) and its info."""
    t0 = time.perf_counter()
    bank, bank_info = build_bank_dir(base, cfg, cache)
    timings["bank"] = time.perf_counter() - t0
    say(cfg, f"[demo] bank: {bank_info['entries']} experiences (base {bank_info['base_successes']} successes of "
              f"{bank_info['base_episodes']}, expert {bank_info['expert']}; "
              f"{'cached' if bank_info['cached'] else 'built'}, {timings['bank']:.0f}s)")
    return bank, bank_info


def coldstart_pairs_stage(base: Base, cfg: StageConfig, bank: Path, cache: Path, timings: dict[str, float],
                          lopd: bool = True) -> tuple[list[Path], dict[str, Any]]:
    """3a. The trace files the cold-start pairs come from, and what the report says of them: the
    bank's own episodes, or (``coldstart_source="referenced"``, when ``lopd``: an LOPD run is cold-started) the
    base's referenced episodes (:func:`coldstart_traces_dir`)."""
    cs_traces = [bank / "base_traces.jsonl", bank / "expert_traces.jsonl"]
    cs_info: dict[str, Any] = {"source": cfg.coldstart_source}
    if cfg.coldstart_source == "referenced" and cfg.coldstart_steps > 0 and lopd:
        t0 = time.perf_counter()
        folder, info = coldstart_traces_dir(base, cfg, bank, cache)
        # the expert's episodes are there only when the base solved too few tasks to fill the bank
        cs_traces, cs_info = [folder / "traces.jsonl", bank / "expert_traces.jsonl"], {**cs_info, **info}
        timings["coldstart_traces"] = time.perf_counter() - t0
        say(cfg, f"[demo] cold-start pairs: {info['successes']} successes of {info['episodes']} referenced "
                  f"base episodes ({'cached' if info['cached'] else 'built'}, {timings['coldstart_traces']:.0f}s)")
    return cs_traces, cs_info


def say(cfg: StageConfig, msg: str) -> None:
    """Print ``msg`` unless progress output is off."""
    if cfg.progress:
        print(msg, flush=True)


def progress_bar(total: int, desc: str, unit: str, enabled: bool):
    """A tqdm bar, or None when ``enabled`` is false."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True)
