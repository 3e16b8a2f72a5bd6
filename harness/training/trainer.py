"""The trainer: one budgeted loop for every learner.

Each step: take ``rollouts_per_step / G`` tasks from a seeded per-epoch order (without
replacement), let the student play G episodes of each (split across ranks by whole groups),
write every episode to the trace file, hand the batch to the learner for its update, log the
metrics, evaluate on held-out tasks whenever the generation count crosses a multiple of
``eval.every_generations``, and checkpoint. The budget is counted in generations (one episode =
one generation)::

    lopd train harness/configs/grpo.yaml run_dir=runs/grpo generations=640
    torchrun --nproc_per_node 2 -m harness.training.trainer harness/configs/grpo.yaml distributed.strategy=fsdp

    trainer = Trainer(load_config(TrainConfig, "x.yaml"))
    summary = trainer.run()           # resumes from run_dir's newest checkpoint when there is one

Run directory: ``config.yaml``, ``metrics.jsonl`` (one record per step and per evaluation, with
``step`` and ``generations``), ``traces.jsonl`` (every episode, meta: run, learner, step,
generation, phase), ``checkpoints/`` (:mod:`harness.training.checkpoint`), ``tb/`` (TensorBoard).
A run killed at any point and started again resumes from its newest checkpoint and writes the
same metrics as an uninterrupted run. Started again with other settings it is refused, unless asked
(``allow_config_change``): then ``config.N.yaml`` keeps the old config and ``config_changes.jsonl``
says what changed (:mod:`harness.training.run_record`).
"""

from __future__ import annotations

import copy
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.training.checkpoint import (clear_staging, latest_checkpoint, publish, read_trainer_state, rng_state,
                                set_rng_state, staging_dir, write_json)
from harness.config import config_and_overrides, save_config
from harness.distributed import (DistInfo, apply_fsdp, barrier, gather_objects, init_distributed, shutdown,
                                 split_evenly, sum_floats)
from harness.engines.base import SamplingParams
from harness.env_source import make_env, open_env
from harness.learners.base import LearnerContext, Rollout, StepBatch, get_learner
from harness.learners.common import TokenScorer
from harness.metrics import MetricsLogger, file_size, truncate_to
from harness.rollout import rollout, rollout_in_flight
from harness.training.run_record import check_rerun, record_change
from harness.training.sampler import EpochSampler, derive_seed
from harness.training.train_config import TrainConfig, load_train_config


def load_student(cfg: TrainConfig, device: torch.device) -> tuple[torch.nn.Module, Any]:
    """The initial student and its tokenizer (``tiny:<preset>``, ``micro:pinned`` or a local HF directory)."""
    from harness.models import build_tiny_model, load_model
    from harness.models.pinned import resolve_model_path

    from harness.models.tiny import truncate_layers

    if cfg.model.random_shape:
        raise ValueError("model.random_shape applies only to `lopd train --dry-run` with a model whose weights are "
                         "not on disk")
    dtype = getattr(torch, cfg.model.dtype)
    path = resolve_model_path(cfg.model.path)
    if path.startswith("tiny:"):
        model, tok = build_tiny_model(path.split(":", 1)[1], seed=cfg.model.tiny_seed)
        if cfg.model.num_hidden_layers is not None and cfg.model.num_hidden_layers > model.config.num_hidden_layers:
            raise ValueError(f"model.num_hidden_layers={cfg.model.num_hidden_layers}: {path} has only "
                             f"{model.config.num_hidden_layers} layers")
        model = truncate_layers(model, cfg.model.num_hidden_layers).to(dtype=dtype)
    else:
        model, tok = load_model(path, dtype=dtype, num_hidden_layers=cfg.model.num_hidden_layers)
    if cfg.model.gradient_checkpointing:
        from lopd.checkpointing import checkpoint_layers

        checkpoint_layers(model.get_decoder().layers)  # copies (teachers, the composer's backbone) keep it
    return model.to(device), tok


def resolve_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


class Trainer:
    """Builds everything a run needs from a :class:`TrainConfig`; :meth:`run` trains."""

    def __init__(self, cfg: TrainConfig, dist: DistInfo | None = None, allow_config_change: bool = False):
        import envs  # noqa: F401  (registers the lopd/* ids)
        import gymnasium as gym

        self.cfg = cfg
        # before anything heavy: a run_dir trained with other settings is refused (harness.training.run_record)
        self._config_change = check_rerun(cfg, allow_config_change)
        self.dist = dist or init_distributed(resolve_device(cfg.model.device), cfg.distributed.backend)
        self.run_dir = Path(cfg.run_dir)
        random.seed(cfg.seed)
        np.random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        self._gym = gym
        self.env_id, self.env = open_env(cfg.env)
        tasks = self.env.unwrapped.all_tasks()
        self.tasks = {t.task_id: t for t in tasks}
        self.train_ids = [t.task_id for t in tasks if t.split == cfg.env.train_split][:cfg.env.max_train_tasks]
        self.eval_ids = [t.task_id for t in tasks if t.split == cfg.env.eval_split][:cfg.eval.max_tasks]
        self._pool: list[Any] = []

        self.student, self.tokenizer = load_student(cfg, self.dist.device)
        self.student.train()
        # Kept on the CPU: frozen copies load from it; on a GPU it would take a model's worth of memory.
        initial = {k: v.detach().to("cpu", copy=True) for k, v in self.student.state_dict().items()}
        fsdp = self.dist.enabled and cfg.distributed.strategy == "fsdp"
        self.template = copy.deepcopy(self.student) if fsdp else self.student
        if cfg.model.logits_chunk < 0:
            raise ValueError("model.logits_chunk must be >= 0")
        self.scorer = TokenScorer(self.student, cfg.model.logits_chunk)
        if fsdp:
            apply_fsdp(self.scorer, self.student.get_decoder().layers)
        params = [p for p in self.scorer.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay)
        self.rollout_model = copy.deepcopy(self.template).eval() if fsdp else self.student
        from harness.engines.hf import HFEngine

        self.local_engine = HFEngine(self.rollout_model, self.tokenizer)
        self.engine, self.teacher_engine = self.local_engine, None
        try:
            self._build(initial)
        except BaseException:
            self._close_engines()  # launched servers must not outlive a failed start
            raise
        self._open_logs()

    def _build(self, initial: dict[str, torch.Tensor]) -> None:
        """The learner, the task order, the engines, and the resumed state."""
        cfg, gym = self.cfg, self._gym
        self.teacher_engine = self._open_teachers(initial)
        self.ctx = LearnerContext(cfg=cfg, student=self.student, scorer=self.scorer, optimizer=self.optimizer,
                                  tokenizer=self.tokenizer, dist=self.dist, tasks=self.tasks, env_id=self.env_id,
                                  make_env=lambda: make_env(cfg.env, self.env_id), initial_state=initial,
                                  run_dir=self.run_dir, full_state=self.full_state, template=self.template,
                                  teacher_engine=self.teacher_engine)
        learner_cls = get_learner(cfg.learner)
        self.learner = learner_cls(self.ctx)
        self.group = 1 if not learner_cls.uses_rollouts else (cfg.group_size or learner_cls.default_group_size)
        if cfg.rollouts_per_step % self.group:
            raise ValueError(f"rollouts_per_step={cfg.rollouts_per_step} is not a multiple of the group size {self.group}")
        items = self.learner.dataset_ids() if not learner_cls.uses_rollouts else self.train_ids
        self.sampler = EpochSampler(items, derive_seed(cfg.seed, "order"))
        self.total_steps = cfg.generations // cfg.rollouts_per_step
        if self.total_steps < 1:
            raise ValueError(f"generations={cfg.generations} is less than one step of {cfg.rollouts_per_step}")
        self.step, self.generations = 0, 0
        self.run_name = self.run_dir.name
        self._resumed_from: Path | None = None
        self.engine = self._open_engine()
        self._resume()
        if self.engine is not self.local_engine and self._resumed_from is None:
            self._refresh_engine()  # attached servers get the initial weights; every server is checked

    # ---- weights ----------------------------------------------------------------------------
    def full_state(self) -> dict[str, torch.Tensor]:
        """The student's full state dict on every rank (a collective under FSDP)."""
        if self.template is self.student:
            return self.student.state_dict()
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        sd = get_model_state_dict(self.scorer, options=StateDictOptions(full_state_dict=True))
        return {k.removeprefix("lm."): v for k, v in sd.items()}

    @property
    def sync_root(self) -> Path:
        """Where the servers read weights from (a filesystem they share with rank 0)."""
        return Path(self.cfg.engine.sync_dir or self.run_dir / "sync")

    def _servers(self, ec: Any, model_dir: Path, log_dir: Path, name: str) -> Any:
        from harness.engines.server import open_servers

        if self.dist.enabled and ec.launch:
            raise ValueError("under torchrun, start the servers beside the job and attach with engine.urls")
        return open_servers(ec, model_dir=str(model_dir.resolve()), log_dir=log_dir, served_name=name,
                            eos_token_ids=self.local_engine.eos_token_ids, dtype=self.cfg.model.dtype,
                            gpu=self.dist.device.type == "cuda", embedding=self.student.get_input_embeddings().weight)

    def _open_engine(self) -> Any:
        """The in-process HF engine, or a pool of vLLM/SGLang servers (launched from, or synced to, the
        initial weights and checked against the in-process model before any training)."""
        ec = self.cfg.engine
        if ec.kind == "hf":
            return self.local_engine
        pool = self._servers(ec, self._write_sync(0), self.run_dir / "servers", "student")
        if self.dist.is_main:  # the trainer's rank 0 alone sends weights
            backend = ec.weight_sync_backend
            if backend == "auto":
                backend = "nccl" if self.dist.device.type == "cuda" else "gloo"
            try:
                pool.connect_weight_sync(ec, backend)
            except BaseException:
                pool.close()
                raise
        return pool

    def _open_teachers(self, initial: dict[str, torch.Tensor]) -> Any:
        """Servers of the frozen initial model for teacher scoring (``engine.teacher_urls``/``teacher_launch``),
        set to and checked against the initial weights; None without them."""
        from dataclasses import replace

        from harness.engines.hf import HFEngine
        from harness.engines.server import check_servers, write_sync_checkpoint
        from harness.learners.common import clone_model

        ec = self.cfg.engine
        if not (ec.teacher_urls or ec.teacher_launch):
            return None
        if ec.kind == "hf":
            raise ValueError("engine.teacher_urls/teacher_launch need engine.kind vllm or sglang")
        path = self.sync_root / "initial"
        if self.dist.is_main:
            write_sync_checkpoint(self.template, initial, self.tokenizer, path)
        barrier(self.dist)
        tcfg = replace(ec, urls=list(ec.teacher_urls), launch=ec.teacher_launch, port=ec.port + ec.launch)
        pool = self._servers(tcfg, path, self.run_dir / "servers" / "teacher", "teacher")
        try:
            if self.dist.is_main:
                if ec.teacher_urls:
                    pool.update_weights(str(path.resolve()))
                reference = HFEngine(clone_model(self.template, initial), self.tokenizer)
                check_servers(pool, reference, self._probe(), ec.check_tolerance, "the teacher servers")
            barrier(self.dist)
        except BaseException:
            pool.close()
            raise
        return pool

    def _write_sync(self, step: int) -> Path:
        """Rank 0 writes the student as ``sync/step-<step>`` for the servers (the previous one goes)."""
        path = self._save_sync(step, self.full_state())
        barrier(self.dist)
        return path

    def _save_sync(self, step: int, state: dict[str, torch.Tensor]) -> Path:
        from harness.engines.server import write_sync_checkpoint

        path = self.sync_root / f"step-{step}"
        if self.dist.is_main:
            self.sync_root.mkdir(parents=True, exist_ok=True)
            write_sync_checkpoint(self.template, state, self.tokenizer, path)
            for old in self.sync_root.glob("step-*"):
                if old != path and old.is_dir():
                    shutil.rmtree(old, ignore_errors=True)
        return path

    def _refresh_engine(self) -> None:
        """Put the current weights where rollouts run (in memory, or through the sync folder); a server sync
        is checked against the student."""
        if self.rollout_model is not self.student:
            self.rollout_model.load_state_dict(self.full_state(), strict=False)
        self.local_engine.update_weights(self.rollout_model)
        if self.engine is self.local_engine:
            return
        from harness.engines.server import check_servers

        state = self.full_state()  # every rank: a collective under FSDP
        if self.dist.is_main:
            if self.engine.weight_sync == "collective":
                self.engine.update_weights(state)
            else:
                self.engine.update_weights(str(self._save_sync(self.step, state).resolve()))
            check_servers(self.engine, self.local_engine, self._probe(), self.cfg.engine.check_tolerance,
                          f"after the weight sync of step {self.step}")
        barrier(self.dist)

    def _probe(self) -> list[int]:
        """A short in-distribution sequence: the first training task's prompt, at most 64 tokens."""
        from harness.rollout import render_prompt

        _, info = self.env.reset(seed=0, options={"task_id": self.train_ids[0]} if self.train_ids else None)
        return render_prompt(self.tokenizer, info.get("messages", []), **self.cfg.rollout.template_kwargs)[:64]

    # ---- environments and rollouts ----------------------------------------------------------
    def _envs(self, n: int) -> list[Any]:
        while len(self._pool) < n:
            self._pool.append(make_env(self.cfg.env, self.env_id))
        return self._pool[:n]

    def _play(self, jobs: list[tuple[str, int]], sampling: SamplingParams, phase: str, step: int) -> list[Any]:
        """Play ``jobs`` = [(task_id, global index)]; returns trajectories with trace meta set
        (training episodes: ``generation`` = their 0-based index in the budget; evaluation
        episodes: ``generations`` = the budget spent by the model that played them)."""
        if not jobs:
            return []
        envs = self._envs(len(jobs))
        play = rollout_in_flight if getattr(self.engine, "concurrent", False) else rollout
        self.local_engine.clear_cache()
        trajs = play(envs, self.engine, self.tokenizer, sampling=sampling,
                     seeds=[derive_seed(self.cfg.seed, phase, step, i) for _, i in jobs],
                     options=[{"task_id": t} for t, _ in jobs], config=self.cfg.rollout,
                     meta={"run": self.run_name, "learner": self.cfg.learner, "step": step, "phase": phase})
        self.local_engine.clear_cache()
        for tr, (_, i) in zip(trajs, jobs):
            tr.episode.meta.update({"generation": self.generations + i} if phase == "train"
                                   else {"generations": self.generations, "sample": i})
        return trajs

    def _sampling(self, temperature: float, seed: int) -> SamplingParams:
        s = self.cfg.sampling
        return SamplingParams(temperature=temperature, top_p=s.top_p, top_k=s.top_k, max_new_tokens=s.max_new_tokens,
                              seed=seed)

    def collect(self, step: int) -> tuple[StepBatch, list[Any]]:
        """This step's batch: rollouts of this rank's groups (or dataset items for SFT)."""
        n_slots = self.cfg.rollouts_per_step // self.group
        picked = self.sampler.take(n_slots)
        mine = split_evenly(n_slots, self.dist)
        if not self.learner.uses_rollouts:
            return StepBatch(step, [], self.cfg.rollouts_per_step, items=[picked[g] for g in mine]), []
        jobs = [(picked[g], g * self.group + j) for g in mine for j in range(self.group)]
        trajs = self._play(jobs, self._sampling(self.cfg.sampling.temperature,
                                                derive_seed(self.cfg.seed, "train", step, self.dist.rank)),
                           "train", step)
        rollouts = [Rollout(tr, self.tasks[t], i // self.group, i) for tr, (t, i) in zip(trajs, jobs)]
        return StepBatch(step, rollouts, self.cfg.rollouts_per_step), [tr.episode for tr in trajs]

    def _write_traces(self, episodes: list[Any]) -> None:
        if not self.cfg.log.traces:
            return
        everyone = gather_objects(episodes, self.dist)
        if self.dist.is_main:
            for part in everyone:
                for ep in part:
                    self.traces.write(ep)

    @staticmethod
    def _episode_sums(episodes: list[Any]) -> list[float]:
        return [float(len(episodes)), sum(float(e.reward) for e in episodes),
                sum(1.0 for e in episodes if e.reward >= 1.0), sum(float(len(e.steps)) for e in episodes),
                sum(float(e.n_tool_calls) for e in episodes),
                sum(float(sum(len(s.token_ids or []) for s in e.steps)) for e in episodes),
                sum(1.0 for e in episodes if e.truncated)]

    def _episode_metrics(self, prefix: str, episodes: list[Any]) -> dict[str, float]:
        n, r, ok, steps, calls, toks, trunc = sum_floats(self._episode_sums(episodes), self.dist)
        n = max(n, 1.0)
        return {f"{prefix}/reward": r / n, f"{prefix}/pass_rate": ok / n, f"{prefix}/env_steps": steps / n,
                f"{prefix}/tool_calls": calls / n, f"{prefix}/response_tokens": toks / n,
                f"{prefix}/truncated": trunc / n}

    # ---- evaluation ---------------------------------------------------------------------------
    def evaluate(self) -> dict[str, float]:
        """Play every eval task ``eval.samples`` times with the current student; log and return metrics."""
        ec = self.cfg.eval
        t0 = time.perf_counter()
        jobs = [(tid, k * ec.samples + s) for k, tid in enumerate(self.eval_ids) for s in range(ec.samples)]
        mine = [jobs[i] for i in split_evenly(len(jobs), self.dist)]
        episodes = []
        for c in range(0, len(mine), max(1, ec.batch_size)):
            chunk = mine[c:c + max(1, ec.batch_size)]
            seed = derive_seed(self.cfg.seed, "eval", self.generations, chunk[0][1])
            episodes += [tr.episode for tr in self._play(chunk, self._sampling(ec.temperature, seed), "eval", self.step)]
        self._write_traces(episodes)
        rec = {"step": self.step, "generations": self.generations, **self._episode_metrics("eval", episodes),
               "eval/episodes": sum_floats([len(episodes)], self.dist)[0], "time/eval": time.perf_counter() - t0}
        self._log(rec)
        return rec

    # ---- logging ----------------------------------------------------------------------------
    def _open_logs(self) -> None:
        self.metrics = self.traces = None
        if self.dist.is_main:
            from envs.trace import TraceWriter

            self.run_dir.mkdir(parents=True, exist_ok=True)
            if self._config_change is not None:
                kept = record_change(self.run_dir, self._config_change, self.step, self.generations)
                print(f"[train] {self.run_dir}: settings changed from step {self.step} on "
                      f"({self._config_change.describe()}); the old config is kept as {kept.name}", file=sys.stderr)
            save_config(self.cfg, self.run_dir / "config.yaml")
            self.metrics = MetricsLogger(self.run_dir / "metrics.jsonl",
                                         tensorboard_dir=self.run_dir / "tb" if self.cfg.log.tensorboard else None)
            self.traces = TraceWriter(self.run_dir / "traces.jsonl")

    def _log(self, rec: dict[str, Any]) -> None:
        if self.metrics is not None:
            self.metrics.write(rec)

    # ---- checkpoints ------------------------------------------------------------------------
    def save_checkpoint(self) -> Path | None:
        """Write a checkpoint of the current step (all ranks call this; rank 0 writes shared files)."""
        from harness.training.checkpoint import step_dir

        tmp = staging_dir(self.run_dir, self.step)
        full = self.full_state()
        optim = self._optimizer_state()
        if self.dist.is_main:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            clear_staging(self.run_dir)
            (tmp / "files").mkdir(parents=True)
            self.template.save_pretrained(str(tmp / "student"), state_dict=full)
            self.tokenizer.save_pretrained(str(tmp / "student"))
            torch.save(optim, tmp / "optimizer.pt")
            torch.save(self.learner.state_dict(), tmp / "learner.pt")
            self.learner.save_files(tmp / "files")
            write_json(tmp / "trainer.json", {
                "step": self.step, "generations": self.generations, "sampler": self.sampler.state_dict(),
                "metrics_offset": self.metrics.tell(), "traces_offset": file_size(self.run_dir / "traces.jsonl"),
                "learner": self.cfg.learner, "world": self.dist.world})
        barrier(self.dist)
        torch.save(rng_state(), tmp / f"rng_rank{self.dist.rank}.pt")
        barrier(self.dist)
        path = publish(self.run_dir, self.step, self.cfg.checkpoint.keep) if self.dist.is_main else None
        barrier(self.dist)
        return path or step_dir(self.run_dir, self.step)

    def _optimizer_state(self) -> dict[str, Any]:
        if self.template is self.student:
            return self.optimizer.state_dict()
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        return get_optimizer_state_dict(self.scorer, self.optimizer, options=StateDictOptions(full_state_dict=True))

    def _resume(self) -> None:
        ck = latest_checkpoint(self.run_dir) if self.cfg.checkpoint.resume else None
        if ck is None:
            if self.dist.is_main:  # a start from scratch: what an earlier start wrote before any checkpoint goes
                truncate_to(self.run_dir / "metrics.jsonl", 0)
                truncate_to(self.run_dir / "traces.jsonl", 0)
            barrier(self.dist)
            return
        from safetensors.torch import load_file

        state = read_trainer_state(ck)
        if state.get("learner") != self.cfg.learner:
            raise ValueError(f"{ck} is a {state.get('learner')} checkpoint; this run's learner is {self.cfg.learner}")
        sd = {}
        for f in sorted((ck / "student").glob("*.safetensors")):
            sd.update(load_file(str(f)))
        optim = torch.load(ck / "optimizer.pt", map_location=self.dist.device, weights_only=False)
        if self.template is self.student:
            missing, unexpected = self.student.load_state_dict(sd, strict=False)
            if unexpected or set(missing) - {"lm_head.weight"}:
                raise ValueError(f"{ck}/student does not fit the model: missing {missing[:3]}, unexpected {unexpected[:3]}")
            self.optimizer.load_state_dict(optim)
        else:
            from torch.distributed.checkpoint.state_dict import (StateDictOptions, set_model_state_dict,
                                                                 set_optimizer_state_dict)

            full = {f"lm.{k}": v for k, v in self.template.state_dict().items()}
            full.update({f"lm.{k}": v for k, v in sd.items()})
            opts = StateDictOptions(full_state_dict=True)
            set_model_state_dict(self.scorer, full, options=opts)
            set_optimizer_state_dict(self.scorer, self.optimizer, optim, options=opts)
        self.learner.load_state_dict(torch.load(ck / "learner.pt", map_location=self.dist.device, weights_only=False))
        self.learner.load_files(ck / "files")
        rng_file = ck / f"rng_rank{self.dist.rank}.pt"
        if rng_file.exists():
            set_rng_state(torch.load(rng_file, weights_only=False))
        self.step, self.generations = int(state["step"]), int(state["generations"])
        self.sampler.load_state_dict(state["sampler"])
        if self.dist.is_main:
            truncate_to(self.run_dir / "metrics.jsonl", int(state["metrics_offset"]))
            truncate_to(self.run_dir / "traces.jsonl", int(state["traces_offset"]))
        barrier(self.dist)
        self._refresh_engine()
        self._resumed_from = ck

    # ---- the loop -----------------------------------------------------------------------------
    def _eval_due(self, before: int, after: int) -> bool:
        every = self.cfg.eval.every_generations
        return bool(self.eval_ids) and every > 0 and before // every < after // every

    def train_step(self) -> dict[str, Any]:
        """One step: this step's rollouts, the learner's update, the weights to the engine; logs and returns
        the step's record (``run`` calls it; ``lopd train --dry-run`` calls it once)."""
        cfg = self.cfg
        t0 = time.perf_counter()
        self.step += 1
        batch, episodes = self.collect(self.step)
        t_roll = time.perf_counter() - t0
        self._write_traces(episodes)
        t1 = time.perf_counter()
        learner_metrics = self.learner.train_step(batch)
        t_update = time.perf_counter() - t1
        self._refresh_engine()
        self.generations += cfg.rollouts_per_step
        rec = {"step": self.step, "generations": self.generations, "epoch": self.sampler.epoch}
        if self.learner.uses_rollouts:
            rec.update(self._episode_metrics("train", episodes))
        rec.update({(k if k.startswith("time/") else f"train/{k}"): v for k, v in learner_metrics.items()})
        rec.update({"time/rollout": t_roll, "time/update": t_update, "time/step": time.perf_counter() - t0})
        self._log(rec)
        return rec

    def run(self) -> dict[str, Any]:
        """Train until the generation budget is spent; returns the last train and eval metrics."""
        cfg = self.cfg
        bar = None
        if self.dist.is_main and cfg.log.progress:
            from tqdm import tqdm

            bar = tqdm(total=self.total_steps * cfg.rollouts_per_step, initial=self.generations, unit="gen",
                       desc=f"{cfg.learner} {self.run_name}", file=sys.stderr, dynamic_ncols=True)
        last_eval: dict[str, Any] = {}
        last: dict[str, Any] = {}
        try:
            if self.step == 0 and cfg.eval.at_start and self.eval_ids:
                last_eval = self.evaluate()
            while self.step < self.total_steps:
                before = self.generations
                last = rec = self.train_step()
                if bar is not None:
                    bar.update(cfg.rollouts_per_step)
                    bar.set_postfix({k.split("/")[-1]: round(v, 3) for k, v in rec.items()
                                     if k in ("train/reward", "train/loss") and isinstance(v, float)})
                final = self.step == self.total_steps
                if self._eval_due(before, self.generations) or (final and cfg.eval.at_end and self.eval_ids):
                    last_eval = self.evaluate()
                every = cfg.checkpoint.every_steps
                if final or (every > 0 and self.step % every == 0):
                    self.save_checkpoint()
        finally:
            if bar is not None:
                bar.close()
        return {"train": last, "eval": last_eval, "run_dir": str(self.run_dir), "steps": self.step,
                "generations": self.generations}

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.close()
        if self.traces is not None:
            self.traces.close()
        self._close_engines()

    def _close_engines(self) -> None:
        for eng in {id(e): e for e in (self.engine, self.teacher_engine, self.local_engine) if e is not None}.values():
            eng.close()


def example_config(name: str) -> Path:
    """The packaged example config ``harness/configs/<name>.yaml``."""
    from importlib import resources

    path = Path(str(resources.files("harness").joinpath("configs", f"{name}.yaml")))
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise FileNotFoundError(f"no example config {name!r}; known: {', '.join(known)}")
    return path


def train(cfg: TrainConfig, dist: DistInfo | None = None, allow_config_change: bool = False) -> dict[str, Any]:
    """Build a :class:`Trainer`, run it and close its files."""
    trainer = Trainer(cfg, dist, allow_config_change)
    try:
        return trainer.run()
    finally:
        trainer.close()


def main(argv: list[str] | None = None, announce: bool = True) -> int:
    """``python -m harness.training.trainer CONFIG.yaml [key=value ...]`` (the torchrun entry point)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m harness.training.trainer", description="Train a student (see lopd train).")
    ap.add_argument("config", nargs="?", help="YAML config (default: built-in defaults)")
    ap.add_argument("overrides", nargs="*", help="key=value overrides, e.g. optim.lr=1e-4")
    ap.add_argument("--allow-config-change", action="store_true",
                    help="continue a run_dir trained with other settings (recorded: config.N.yaml, config_changes.jsonl)")
    args = ap.parse_args(argv)
    path, overrides = config_and_overrides(args.config, args.overrides)
    rank0 = announce and os.environ.get("RANK", "0") == "0"  # under torchrun, one line for the job
    cfg = load_train_config(path, overrides, log=(lambda s: print(s, file=sys.stderr)) if rank0 else None)
    dist = init_distributed(resolve_device(cfg.model.device), cfg.distributed.backend)
    try:
        summary = train(cfg, dist, args.allow_config_change)
    finally:
        shutdown(dist)
    if dist.is_main:
        ev = summary["eval"]
        print(f"done: {summary['steps']} steps, {summary['generations']} generations"
              + (f", eval reward {ev['eval/reward']:.3f}" if ev else "") + f"; run dir {summary['run_dir']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
