"""Speed of the vLLM server engine against the in-process HF engine: multi-turn rollouts and a GRPO step.

Same model (the pinned micro-world base by default), same env, tasks, seeds and sampling on both
sides, in one run; the sides alternate within each repeat, so a load spike on the shared machine
hits both alike. Medians over repeats, and medians of the ratios of back-to-back runs (vllm / hf).

* ``rollout``: ``--episodes`` micro-world episodes with the demo's settings (``lopd/micro-v0`` of the
  base's world, temperature 0.7, top-p 0.95, top-k 20, 96 tokens a turn, at most 8 turns), the first
  training tasks, env seeds 0..N-1. ``hf``: :class:`HFEngine` + :func:`harness.rollout.rollout` (one
  lock-step batch, each row's KV cache kept across turns). ``vllm``: the server pool +
  :func:`harness.rollout.rollout_in_flight` (each episode on its own thread; the server batches
  continuously; its prefix cache is reset before every repeat). Sampled tokens per wall second
  (the episodes' generated tokens / wall seconds), wall seconds, and tokens per CPU second of every
  process involved (this one, plus the server's process tree when this script launched it).
* ``grpo_step``: one whole GRPO step (``harness/configs/grpo.yaml``, ``--rollouts-per-step`` episodes,
  groups of 4) through :class:`harness.training.trainer.Trainer` with ``engine.kind=hf`` and with
  ``engine.kind=vllm`` attached to the same server (``engine.urls``): ``time/step``, ``time/rollout``,
  ``time/update`` from the step's metrics, and the weight sync after the update (the wall time of
  ``Trainer._refresh_engine``, measured by a subclass here: writing ``sync/step-1``, the server's
  reload, the probe check; ``sync_write_s`` is the first part alone; ``time/step`` includes the
  sync). The trainer and its env pool (each env reset once) are built before the clock starts, as
  for any step after a run's first; the end-of-run checkpoint is not timed.

The server is launched here (``harness.engines.server.open_servers``, one vLLM server from an untied
copy of the model written with ``write_sync_checkpoint``, closed at the end), or attached with
``--url`` (it must serve the same model and read this machine's files: the grpo step syncs its
weights through a directory written here, and this script puts the base back at the end). A
launched CPU server gets the harness's ``engine.cpu_args`` (``--no-enable-chunked-prefill`` among
them: vLLM 0.32's CPU worker dies on a seeded request prefilled in chunks; docs/GPU.md), plus
``--server-args``. Torch threads of this process: ``--threads`` (the HF engine and the
updates). A launched CPU server has its own processes: vLLM binds its worker's OpenMP threads to
the cores it does not reserve for its scheduler (on 2 cores: one thread on one core; the log line
``OpenMP thread binding info`` says which), reported as ``server_threads``.

    python benchmarks/bench_server.py                                  # both cases, launches a CPU server
    python benchmarks/bench_server.py --cases rollout --repeats 5 --json out.json
    python benchmarks/bench_server.py --url http://127.0.0.1:8000     # a server already serving the model
    python benchmarks/bench_server.py --model runs/base --device cuda --dtype bfloat16   # on a GPU
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.engines import HFEngine, SamplingParams  # noqa: E402
from harness.engines.server import EngineConfig, ServerPool, open_servers, write_sync_checkpoint  # noqa: E402
from harness.models.pinned import PINNED_DIR  # noqa: E402
from harness.rollout import RolloutConfig, rollout, rollout_in_flight  # noqa: E402
from harness.training.trainer import Trainer  # noqa: E402

SIDES = ("hf", "vllm")


# ---- setup ---------------------------------------------------------------------------------------
def load(args) -> tuple[Any, Any]:
    from harness.models import load_model

    model, tok = load_model(str(args.model), dtype=getattr(torch, args.dtype), device=args.device)
    return model.eval(), tok


def env_kwargs(model_dir: Path) -> dict[str, Any]:
    """The micro world the base was built for (its ``base_info.json``; the default world otherwise)."""
    from harness.basemodel.config import BaseModelConfig
    from harness.config import from_dict
    from harness.basemodel.config import env_kwargs as demo_env_kwargs

    info_path = model_dir / "base_info.json"
    info = json.loads(info_path.read_text(encoding="utf-8")) if info_path.is_file() else {}
    return demo_env_kwargs(from_dict(BaseModelConfig, info["config"]) if "config" in info else BaseModelConfig())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def open_pool(args, model, tok, base: Path, work: Path) -> ServerPool:
    """Attach to ``--url``, or launch one vLLM server on ``base`` (the model's untied copy)."""
    eos = HFEngine(model, tok).eos_token_ids
    if args.url:
        return open_servers(EngineConfig(kind="vllm", urls=[args.url]), model_dir=str(base), log_dir=work,
                            eos_token_ids=eos)
    ec = EngineConfig(kind="vllm", launch=1, port=args.port or free_port(), extra_args=list(args.server_args),
                      startup_timeout=args.startup_timeout)
    t = time.perf_counter()
    pool = open_servers(ec, model_dir=str(base), log_dir=work / "logs", eos_token_ids=eos, dtype=args.dtype,
                        gpu=str(args.device).startswith("cuda"))
    log = pool.servers[0].log
    print(f"server {pool.servers[0].url} up in {time.perf_counter() - t:.0f} s (log {log}):\n  "
          + log.read_text(encoding="utf-8", errors="replace").splitlines()[0], flush=True)
    return pool


def server_cpu_seconds(pool: ServerPool) -> float | None:
    """User + system CPU seconds of a launched server's processes (its session), None when attached."""
    import psutil

    total, found = 0.0, False
    for s in pool.servers:
        if s.process is None:
            return None
        for p in psutil.process_iter():
            try:
                if os.getsid(p.pid) == s.process.pid:
                    c = p.cpu_times()
                    total += c.user + c.system + c.children_user + c.children_system
                    found = True
            except (psutil.Error, OSError):
                continue
    return total if found else None


def server_threads(pool: ServerPool) -> str:
    """The launched server's OpenMP binding, from its log ('core ids=[0]'); '?' when unknown."""
    s = pool.servers[0]
    if s.log is None or not s.log.exists():
        return "?"
    text = s.log.read_text(encoding="utf-8", errors="replace")
    cores = re.findall(r"core ids=\[([^\]]*)\]", text)
    reserved = re.findall(r"reserved_cpus=\[([^\]]*)\]", text)
    if not cores:
        return "?"
    n = len([c for c in cores[-1].split(",") if c.strip()])
    kept = reserved[-1] if reserved else ""
    return f"{n} OpenMP thread(s) on core(s) [{cores[-1]}], core(s) [{kept}] reserved for its scheduler"


# ---- case: rollout -------------------------------------------------------------------------------
class RolloutCase:
    def __init__(self, args, model, tok, pool: ServerPool):
        import gymnasium as gym

        import envs  # noqa: F401  (registers lopd/micro-v0)

        self.args, self.tok, self.pool = args, tok, pool
        kw = env_kwargs(Path(args.model))
        self.envs = [gym.make("lopd/micro-v0", max_steps=args.max_turns, **kw) for _ in range(args.episodes)]
        tasks = [t.task_id for t in self.envs[0].unwrapped.all_tasks() if t.split == "train"]
        if len(tasks) < args.episodes:
            tasks = (tasks * args.episodes)[:args.episodes]
        self.options = [{"task_id": t} for t in tasks[:args.episodes]]
        self.seeds = list(range(args.episodes))
        self.config = RolloutConfig(max_turns=args.max_turns)
        self.hf = HFEngine(model, tok)

    def sampling(self, repeat: int) -> SamplingParams:
        a = self.args
        return SamplingParams(temperature=a.temperature, top_p=a.top_p, top_k=a.top_k,
                              max_new_tokens=a.max_new_tokens, seed=1000 + repeat)

    def run(self, side: str, repeat: int) -> dict[str, float]:
        kw = dict(sampling=self.sampling(repeat), seeds=self.seeds, options=self.options, config=self.config,
                  meta={"run": "bench_server"})
        if side == "vllm":
            for eng in self.pool.engines:
                eng.reset_prefix_cache()  # no repeat reuses an earlier repeat's cached prefixes
        else:
            self.hf.clear_cache()
        srv0 = server_cpu_seconds(self.pool) if side == "vllm" else 0.0
        t, c = time.perf_counter(), time.process_time()
        if side == "hf":
            trajs = rollout(self.envs, self.hf, self.tok, **kw)
        else:
            trajs = rollout_in_flight(self.envs, self.pool, self.tok, **kw)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        srv1 = server_cpu_seconds(self.pool) if side == "vllm" else 0.0
        cpu_all = cpu + (srv1 - srv0) if srv0 is not None and srv1 is not None else float("nan")
        tokens = sum(sum(tr.loss_mask) for tr in trajs)
        return {"tokens": tokens, "wall_s": wall, "tokens_per_s": tokens / wall, "cpu_s": cpu_all,
                "tokens_per_cpu_s": tokens / cpu_all if cpu_all == cpu_all else float("nan"),
                "turns": sum(len(tr.episode.steps) for tr in trajs),
                "reward": statistics.fmean(tr.episode.reward for tr in trajs)}


# ---- case: grpo_step -----------------------------------------------------------------------------
class TimedTrainer(Trainer):
    """The trainer, with the wall time of each weight refresh (and of its checkpoint write) recorded."""

    def __init__(self, cfg):
        self.bench_sync: list[tuple[int, float]] = []
        self.bench_write: list[tuple[int, float]] = []
        super().__init__(cfg)

    def _refresh_engine(self) -> None:
        t = time.perf_counter()
        super()._refresh_engine()
        self.bench_sync.append((self.step, time.perf_counter() - t))

    def _save_sync(self, step: int, state) -> Path:
        t = time.perf_counter()
        out = super()._save_sync(step, state)
        self.bench_write.append((step, time.perf_counter() - t))
        return out


class GRPOStepCase:
    def __init__(self, args, model, tok, pool: ServerPool, work: Path):
        self.args, self.pool, self.work = args, pool, work

    def overrides(self, side: str, repeat: int) -> list[str]:
        a = self.args
        out = [f"run_dir={self.work / f'grpo-{side}-{repeat}'}", f"seed={1000 + repeat}", f"model.path={a.model}",
               f"model.dtype={a.dtype}", f"model.device={a.device}",
               f"env.kwargs={json.dumps(env_kwargs(Path(a.model)))}", f"rollouts_per_step={a.rollouts_per_step}",
               f"generations={a.rollouts_per_step}", f"sampling.max_new_tokens={a.max_new_tokens}",
               f"sampling.temperature={a.temperature}", f"sampling.top_p={a.top_p}", f"sampling.top_k={a.top_k}",
               f"rollout.max_turns={a.max_turns}", "eval.at_start=false", "eval.at_end=false",
               "eval.every_generations=0", "checkpoint.every_steps=0", "checkpoint.resume=false",
               "log.progress=false"]
        if side == "vllm":
            # the folder sync (what sync_write_s times); benchmarks/bench_weight_sync.py compares it with memory
            out += ["engine.kind=vllm", f"engine.urls=[{self.pool.servers[0].url}]", "engine.weight_sync=disk"]
        return out

    def run(self, side: str, repeat: int) -> dict[str, float]:
        from harness.config import load_config
        from harness.training.train_config import TrainConfig
        from harness.training.trainer import example_config

        cfg = load_config(TrainConfig, example_config("grpo"), self.overrides(side, repeat))
        trainer = TimedTrainer(cfg)
        try:
            # Setup, as in any step after a run's first: the env pool exists and each env has indexed its
            # tasks (an env's first reset loads every task, ~0.2 s on this VM).
            for env in trainer._envs(self.args.rollouts_per_step):
                env.reset(seed=0, options={"task_id": trainer.train_ids[0]})
            rec = trainer.run()["train"]
        finally:
            trainer.close()
        sync = [s for step, s in trainer.bench_sync if step == 1]
        write = [s for step, s in trainer.bench_write if step == 1]
        tokens = rec["train/response_tokens"] * self.args.rollouts_per_step
        return {"step_s": rec["time/step"], "rollout_s": rec["time/rollout"], "update_s": rec["time/update"],
                "sync_s": sync[-1] if sync else float("nan"), "sync_write_s": write[-1] if write else 0.0,
                "tokens": tokens, "rollout_tokens_per_s": tokens / rec["time/rollout"],
                "reward": rec["train/reward"]}


# ---- driver ----------------------------------------------------------------------------------------
HEADLINE = {"rollout": "tokens_per_s", "grpo_step": "step_s"}


def summarize(case: str, runs: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    keys = [k for k in runs["hf"][0] if isinstance(runs["hf"][0][k], (int, float))]
    med = {side: {k: statistics.median(r[k] for r in runs[side]) for k in keys} for side in SIDES}
    # The HF engine's "sync" is a cache drop (~0 s): no ratio for it.
    paired = {k: statistics.median(b[k] / a[k] for a, b in zip(runs["hf"], runs["vllm"]))
              for k in keys if k not in ("sync_s", "sync_write_s") and all(a[k] for a in runs["hf"])}
    return {"median": med, "paired_ratio_vllm_over_hf": paired, "all": runs}


def report(case: str, entry: dict[str, Any]) -> str:
    med, paired = entry["median"], entry["paired_ratio_vllm_over_hf"]
    if case == "rollout":
        cols = [("tokens_per_s", "tok/s", 0), ("wall_s", "wall s", 1), ("tokens_per_cpu_s", "tok/cpu-s", 0),
                ("tokens", "tokens", 0)]
    else:
        cols = [("step_s", "step s", 1), ("rollout_s", "rollout s", 1), ("update_s", "update s", 2),
                ("sync_s", "sync s", 2), ("rollout_tokens_per_s", "rollout tok/s", 0)]
    lines = [f"{case}:"]
    for side in SIDES:
        lines.append(f"  {side:5s} " + ", ".join(f"{name} {med[side][k]:.{d}f}" for k, name, d in cols))
    lines.append("  vllm/hf paired " + ", ".join(f"{name} {paired[k]:.2f}" for k, name, _ in cols if k in paired))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--model", default=str(PINNED_DIR), help="model directory (a micro-world base)")
    ap.add_argument("--device", default="cpu", help="device of the HF engine and the updates")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads of this process")
    ap.add_argument("--url", default=None, help="attach to this vLLM server instead of launching one")
    ap.add_argument("--port", type=int, default=0, help="port of the launched server (0: a free one)")
    ap.add_argument("--server-args", nargs="*", default=[], help="extra arguments of the launched server")
    ap.add_argument("--startup-timeout", type=float, default=900.0)
    ap.add_argument("--cases", default="rollout,grpo_step")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--episodes", type=int, default=32, help="episodes of the rollout case")
    ap.add_argument("--rollouts-per-step", type=int, default=32, help="episodes of the GRPO step (groups of 4)")
    ap.add_argument("--max-new-tokens", type=int, default=96, help="tokens per assistant turn (the demo's)")
    ap.add_argument("--max-turns", type=int, default=8, help="assistant turns per episode (the demo's)")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--top-k", type=int, default=20)
    ap.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up run of each side")
    ap.add_argument("--work", default=None, help="working directory (default: a temporary one)")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - set(HEADLINE)
    if unknown:
        ap.error(f"unknown case(s) {sorted(unknown)}; known: {', '.join(HEADLINE)}")
    if "grpo_step" in cases and args.rollouts_per_step % 4:
        ap.error("--rollouts-per-step must be a multiple of GRPO's group size 4")
    torch.set_num_threads(args.threads)

    tmp = None if args.work else tempfile.TemporaryDirectory(prefix="bench-server-")
    work = Path(args.work or tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    model, tok = load(args)
    base = write_sync_checkpoint(model, model.state_dict(), tok, work / "base")  # what the server serves
    pool = open_pool(args, model, tok, base, work)
    results: dict[str, Any] = {
        "args": vars(args), "torch_threads": torch.get_num_threads(), "server_threads": server_threads(pool),
        "server_version": pool.engines[0].version(), "load_at_start": os.getloadavg(), "cases": {}}
    print(f"torch threads here: {results['torch_threads']}; server: {results['server_threads']}; "
          f"vLLM {results['server_version']}", flush=True)
    try:
        for case in cases:
            runner = (RolloutCase(args, model, tok, pool) if case == "rollout"
                      else GRPOStepCase(args, model, tok, pool, work))
            if not args.no_warmup:
                for side in SIDES:
                    runner.run(side, -1)
            runs: dict[str, list[dict[str, float]]] = {s: [] for s in SIDES}
            for r in range(args.repeats):
                for side in (SIDES if r % 2 == 0 else SIDES[::-1]):  # alternate which side goes first
                    runs[side].append(runner.run(side, r))
                    last = {k: round(v, 3) for k, v in runs[side][-1].items()}
                    print(f"  {case} repeat {r} {side}: {json.dumps(last)}", flush=True)
            if case == "grpo_step":
                pool.update_weights(str(base))  # the steps trained the server's copy; later cases need the base
            results["cases"][case] = summarize(case, runs)
            print(report(case, results["cases"][case]), flush=True)
    finally:
        results["load_at_end"] = os.getloadavg()
        if args.url and "grpo_step" in cases:  # an attached server goes back to the model it served
            pool.update_weights(str(base))
        pool.close()
        if tmp is not None:
            tmp.cleanup()
    print(f"load average at start {results['load_at_start']}, at end {results['load_at_end']}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
