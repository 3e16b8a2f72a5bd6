"""``lopd demo``: the main job on the smallest setup that exists.

Today it plays the worked-example env with a scripted expert and a random-text policy, writes
their traces and reads them back into a summary. (The micro-world comparison of LOPD against
GRPO replaces it once the learners land.)
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("demo", help="run the main job end to end on the tiny setup")
    p.add_argument("--out", default="runs/demo", help="output directory (default: runs/demo)")
    p.add_argument("--episodes", type=int, default=20, help="episodes per policy")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import gymnasium as gym
    import numpy as np

    import envs  # noqa: F401
    from envs.protocol import render_tool_call
    from envs.trace import Episode, Step, TraceWriter, read_traces

    def expert(task_data: dict, turn: int) -> str:
        plan = [render_tool_call("add_to_cart", {"item": i, "qty": q}) for i, q in task_data["want"].items()]
        plan.append(render_tool_call("checkout", {}))
        return "\n".join(plan) if turn == 0 else "Done."

    rng = np.random.default_rng(args.seed)
    alphabet = list('abc{}"<>/_ :') + ["<tool_call>", "</tool_call>", '"name"', "add_to_cart"]

    def random_text(task_data: dict, turn: int) -> str:
        return "".join(rng.choice(alphabet, size=int(rng.integers(1, 30))))

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trace_path = out / "traces.jsonl"
    trace_path.unlink(missing_ok=True)
    env = gym.make("lopd/shop-v0", max_steps=4)
    with TraceWriter(trace_path) as writer:
        for name, policy in [("expert", expert), ("random", random_text)]:
            for i in range(args.episodes):
                obs, info = env.reset(seed=args.seed + i)
                task = env.unwrapped.task
                steps: list[Step] = []
                done = False
                while not done:
                    obs, reward, term, trunc, info = env.step(policy(task.data, len(steps)))
                    steps.append(info["step"])
                    done = term or trunc
                writer.write(Episode(env_id="lopd/shop-v0", task_id=task.task_id, split=task.split, seed=args.seed + i,
                                     messages=env.unwrapped.messages, tools=env.unwrapped.tools.schemas, steps=steps,
                                     reward=reward, terminated=term, truncated=trunc, meta={"policy": name}))
    rows: dict[str, list[Episode]] = {}
    for ep in read_traces(trace_path):
        rows.setdefault(ep.meta["policy"], []).append(ep)
    print(f"{'policy':<8} {'episodes':>8} {'reward':>7} {'steps':>6} {'calls':>6} {'parse err':>9} {'tool err':>8}")
    for name, eps in rows.items():
        def mean(f):
            return sum(map(f, eps)) / len(eps)
        print(f"{name:<8} {len(eps):>8} {mean(lambda e: e.reward):>7.2f} {mean(lambda e: len(e.steps)):>6.2f} "
              f"{mean(lambda e: e.n_tool_calls):>6.2f} {mean(lambda e: sum(s.n_parse_errors for s in e.steps)):>9.2f} "
              f"{mean(lambda e: sum(s.n_tool_errors for s in e.steps)):>8.2f}")
    print(f"traces: {trace_path}")
    return 0
