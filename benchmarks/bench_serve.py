"""Steps per second of one env served by ``lopd serve`` (OpenEnv's WebSocket protocol, played through
``lopd/remote-v0`` as the trainer plays it) against the same env in-process, and of 8 sessions at once::

    python benchmarks/bench_serve.py --env lopd/shop-v0 --episodes 200 --sessions 8 [--out FILE]

An episode is the shop's scripted expert (reset, the cart's tool calls, checkout, the answer), so every
step does the env's real work; "steps" counts resets too. The server runs in its own process (started
here, on a free port); the in-process peer runs in this one, in the same run. With ``--sessions N``,
N threads each play ``--episodes / N`` episodes on their own session (N env instances on the server).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.run_meta import run_meta  # noqa: E402


def _actions(env: Any, task_id: str) -> list[str]:
    from envs.protocol import render_tool_call

    want = next(t for t in env.unwrapped.all_tasks() if t.task_id == task_id).data["want"]
    return ["\n".join(render_tool_call("add_to_cart", {"item": i, "qty": q}) for i, q in want.items()),
            render_tool_call("checkout", {}), "Done."]


def play(env: Any, episodes: int, task_id: str) -> tuple[int, float, list[float]]:
    """(steps, seconds, per-step seconds) of ``episodes`` expert episodes on ``env``; every one must win."""
    actions = _actions(env, task_id)
    n, lat, t0 = 0, [], time.perf_counter()
    for e in range(episodes):
        t = time.perf_counter()
        env.reset(seed=e, options={"task_id": task_id})
        lat.append(time.perf_counter() - t)
        for a in actions:
            t = time.perf_counter()
            _, reward, term, trunc, _ = env.step(a)
            lat.append(time.perf_counter() - t)
            if term or trunc:
                break
        assert reward == 1.0, f"the expert lost episode {e}: reward {reward}"
        n += 1 + len(actions)
    return n, time.perf_counter() - t0, lat


def _row(steps: int, seconds: float, lat: list[float]) -> dict[str, float]:
    return {"steps": steps, "seconds": round(seconds, 3), "steps_per_s": round(steps / seconds, 1),
            "median_step_ms": round(statistics.median(lat) * 1e3, 3)}


def concurrent(url: str, sessions: int, episodes: int, task_id: str) -> dict[str, float]:
    import gymnasium as gym

    envs_ = [gym.make("lopd/remote-v0", url=url) for _ in range(sessions)]
    try:
        for env in envs_:
            env.reset(seed=0)  # connect every session first: the timing is of steps, not of handshakes
        t0 = time.perf_counter()
        with ThreadPoolExecutor(sessions) as pool:
            outs = list(pool.map(lambda env: play(env, episodes // sessions, task_id), envs_))
        seconds = time.perf_counter() - t0
    finally:
        for env in envs_:
            env.close()
    return _row(sum(o[0] for o in outs), seconds, [x for o in outs for x in o[2]])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="lopd/shop-v0")
    ap.add_argument("--task", default="apples", help="the task every episode plays")
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args(argv)
    import gymnasium as gym

    import envs  # noqa: F401 - registers the lopd/* ids
    from envs.serving.spawn import spawn_server

    local = gym.make(args.env)
    play(local, 5, args.task)  # warm-up
    result: dict[str, Any] = {"in_process": _row(*play(local, args.episodes, args.task))}
    with spawn_server(args.env, max_sessions=args.sessions + 1) as url:
        remote = gym.make("lopd/remote-v0", url=url)
        play(remote, 5, args.task)
        result["served_1_session"] = _row(*play(remote, args.episodes, args.task))
        remote.close()
        result[f"served_{args.sessions}_sessions"] = concurrent(url, args.sessions, args.episodes, args.task)
    base = result["in_process"]["steps_per_s"]
    result["ratio_to_in_process"] = {k: round(v["steps_per_s"] / base, 4) for k, v in result.items()
                                     if k.startswith("served")}
    result["meta"] = run_meta(__file__, argv)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
