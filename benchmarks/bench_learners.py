"""Time per training step of each learner at 32 rollouts a step, split by phase, and peak memory.

    .venv/bin/python benchmarks/bench_learners.py --steps 3 --out /tmp/bench_learners.json

Every learner runs in its own process (so peak RSS is its own) on the tiny model and the micro
world (``lopd/micro-v0``, ~1,300-token prompts): one warm-up step, then ``--steps`` timed steps of
``rollouts_per_step`` episodes (GRPO/SDPO 8 tasks x 4, OPSD/LOPD 32 tasks x 1: equal generations;
``--lopd-group-size 4`` runs LOPD on GRPO's layout, the same tasks and generations a step).
Phases: ``rollout`` (generation + env), ``context`` (oracle / sibling / retrieval), ``teacher``
(teacher scoring), ``student`` (student forward/backward/step), ``composer`` (LOPD: encoder +
QFormer forward/backward + composer step). The bank (OPSD oracles, LOPD retrieval) holds the
scripted expert's episodes of every training task, embedded with the default MiniLM model.

The untrained tiny model never succeeds, so SDPO would score nothing: its first rollout of every
group is marked successful (a timing benchmark, not a learning one) so 3 of 4 rollouts get a
teacher pass, as in a run where each task has a successful sibling.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.run_meta import run_meta


LEARNERS = ["grpo", "opsd", "sdpo", "lopd", "sft"]
PHASES = ["rollout", "context", "teacher", "student", "composer"]


def build_bank(path: Path, env_id: str) -> None:
    """The scripted expert on every micro-world training task -> a saved bank."""
    import gymnasium as gym

    import envs  # noqa: F401
    from envs.micro.expert import run_solver
    from envs.trace import Episode
    from lopd.bank import ExperienceBank

    env = gym.make(env_id).unwrapped
    episodes = []
    for t in env.all_tasks():
        if t.split != "train":
            continue
        run_solver(env, t.task_id)
        episodes.append(Episode(env_id=env_id, task_id=t.task_id, split=t.split, messages=env.messages,
                                tools=env.tools.schemas, steps=env.steps, reward=env.final_reward, terminated=True))
    bank = ExperienceBank()
    bank.add_episodes(episodes, label="expert")
    bank.save(path)


def write_sft_data(path: Path, env_id: str, n: int) -> None:
    import gymnasium as gym

    import envs  # noqa: F401
    from envs.micro.sft import sft_corpus

    with open(path, "w", encoding="utf-8") as f:
        for item in sft_corpus(gym.make(env_id).unwrapped, n, 0, seed=0):
            f.write(json.dumps({"messages": item["messages"]}) + "\n")


def run_one(learner: str, args: argparse.Namespace) -> dict:
    import torch

    from harness.config import load_config
    from harness.learners.common import Timer
    from harness.training.train_config import TrainConfig
    from harness.training.trainer import Trainer

    torch.set_num_threads(args.threads)
    Timer.with_cpu = True
    overrides = [f"learner={learner}", f"run_dir={args.work}/{learner}", f"env.id={args.env}",
                 f"rollouts_per_step={args.rollouts}", f"sampling.max_new_tokens={args.max_new_tokens}",
                 f"rollout.max_turns={args.max_turns}", "log.progress=false", "log.traces=false",
                 "eval.at_start=false", "eval.at_end=false", "eval.every_generations=0", "checkpoint.every_steps=0",
                 "checkpoint.resume=false", f"bank.path={args.work}/bank", "opsd.oracle=bank",
                 f"sft.data=[{args.work}/sft.jsonl]", "optim.lr=1e-4",
                 "lopd.composer_init=random"]  # step cost does not depend on the composer's weights
    if args.max_train_tasks:  # a small task set: from the second epoch on, LOPD's anchor latents are cached
        overrides.append(f"env.max_train_tasks={args.max_train_tasks}")
    if learner == "lopd" and args.lopd_group_size:
        overrides.append(f"group_size={args.lopd_group_size}")
    tr = Trainer(load_config(TrainConfig, None, overrides))
    rows = []
    for step in range(1, args.steps + 2):
        t0, c0 = time.perf_counter(), time.process_time()
        batch, _ = tr.collect(step)
        t_roll, c_roll = time.perf_counter() - t0, time.process_time() - c0
        if learner == "sdpo":
            for r in batch.rollouts:
                r.traj.episode.reward = 1.0 if r.index % tr.group == 0 else 0.0
        t1, c1 = time.perf_counter(), time.process_time()
        m = tr.learner.train_step(batch)
        t_update, c_update = time.perf_counter() - t1, time.process_time() - c1
        tr._refresh_engine()
        row = {"tokens": m.get("tokens", 0.0)}
        for kind, roll, update in (("time", t_roll, t_update), ("cpu", c_roll, c_update)):
            pre = "" if kind == "time" else "cpu_"
            row.update({f"{pre}rollout": roll, f"{pre}update": update, f"{pre}step": roll + update,
                        f"{pre}context": m.get(f"{kind}/context", 0.0) + m.get(f"{kind}/retrieval", 0.0),
                        f"{pre}teacher": m.get(f"{kind}/teacher", 0.0), f"{pre}student": m.get(f"{kind}/student", 0.0),
                        f"{pre}composer": m.get(f"{kind}/composer", 0.0)})
        if step > 1:  # the first step warms caches (embedding model, allocator)
            rows.append(row)
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tr.close()
    return {"learner": learner, "median": med, "steps": rows, "peak_rss_mib": peak_kib / 1024,
            "layout": f"{args.rollouts // tr.group} tasks x {tr.group}"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per learner (after one warm-up step)")
    ap.add_argument("--rollouts", type=int, default=32)
    ap.add_argument("--env", default="lopd/micro-v0")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--max-turns", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads per learner process")
    ap.add_argument("--max-train-tasks", type=int, default=None,
                    help="train on the first N tasks only (N = rollouts per step: LOPD's anchor cache is warm after step 1)")
    ap.add_argument("--lopd-group-size", type=int, default=None,
                    help="LOPD's rollouts per task (default: its own, 1); 4 gives GRPO's 8 tasks x 4 layout")
    ap.add_argument("--learners", nargs="*", default=LEARNERS)
    ap.add_argument("--work", default="/tmp/lopd-bench-learners", help="scratch directory (bank, runs)")
    ap.add_argument("--out", default=None, help="write the JSON results here")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args)))
        return 0
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "bank").exists():
        build_bank(work / "bank", args.env)
    if not (work / "sft.jsonl").exists():
        write_sft_data(work / "sft.jsonl", args.env, 64)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"}
    results = {}
    for learner in args.learners:
        cmd = [sys.executable, __file__, "--one", learner, "--steps", str(args.steps), "--rollouts", str(args.rollouts),
               "--env", args.env, "--max-new-tokens", str(args.max_new_tokens), "--max-turns", str(args.max_turns),
               "--threads", str(args.threads), "--work", args.work]
        if args.max_train_tasks:
            cmd += ["--max-train-tasks", str(args.max_train_tasks)]
        if args.lopd_group_size:
            cmd += ["--lopd-group-size", str(args.lopd_group_size)]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr[-3000:], file=sys.stderr)
            return 1
        results[learner] = json.loads(r.stdout.strip().splitlines()[-1])
        med = results[learner]["median"]
        for pre, what in (("", "wall"), ("cpu_", "CPU ")):
            print(f"{learner:5s} ({results[learner]['layout']}) {what} step {med[pre + 'step']:7.2f}s  "
                  + "  ".join(f"{p} {med[pre + p]:6.2f}" for p in PHASES)
                  + (f"  peak RSS {results[learner]['peak_rss_mib']:.0f} MiB" if not pre else ""), flush=True)
    if "grpo" in results and "lopd" in results:
        g, lo = results["grpo"]["median"], results["lopd"]["median"]
        for pre, what in (("", "wall"), ("cpu_", "CPU")):
            print(f"LOPD / GRPO {what} step time at equal generations: {lo[pre + 'step'] / g[pre + 'step']:.2f}x "
                  f"(update only: {lo[pre + 'update'] / g[pre + 'update']:.2f}x)")
    meta = run_meta(__file__, None, args={k: v for k, v in vars(args).items() if k != "one"})
    if args.out:
        Path(args.out).write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
