"""What one ``lopd/mcp-v0`` episode costs against an in-process env: the server's start (``reset``: a new
process, the MCP handshake, ``tools/list``), one tool call (``step``), the end (``close`` of the session),
beside ``lopd/shop-v0``'s reset and step in the same run::

    python benchmarks/bench_mcp.py --episodes 20 --calls 20 [--out benchmarks/results/mcp.json]

The MCP env plays its shipped notes server (``envs/mcp/example_server.py``, the official SDK's 2.x
``MCPServer`` over stdio); ``--server 'CMD ARGS'`` times any other stdio server (its first tool is called with
``--call-args``). Medians and quartiles in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.run_meta import run_meta  # noqa: E402


def _ms(samples: list[float]) -> dict[str, float]:
    q = statistics.quantiles(samples, n=4) if len(samples) > 1 else samples * 3
    return {"median_ms": round(statistics.median(samples) * 1e3, 2), "q1_ms": round(q[0] * 1e3, 2),
            "q3_ms": round(q[2] * 1e3, 2), "n": len(samples)}


def _call(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def time_env(env: Any, action: str, episodes: int, calls: int, close_each: bool) -> dict[str, Any]:
    """Reset ``episodes`` times and step ``action`` ``calls`` times each; with ``close_each``, also time
    the session's end (what the next reset pays first, measured apart)."""
    resets, steps, ends = [], [], []
    base = env.unwrapped
    for _ in range(episodes):
        t = time.perf_counter()
        env.reset(seed=0)
        resets.append(time.perf_counter() - t)
        for _ in range(calls):
            t = time.perf_counter()
            obs, *_ = env.step(action)
            steps.append(time.perf_counter() - t)
        assert "Error" not in obs, obs
        if close_each:
            t = time.perf_counter()
            base._end_session()
            ends.append(time.perf_counter() - t)
    out = {"reset": _ms(resets), "step": _ms(steps)}
    if ends:
        out["end"] = _ms(ends)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--calls", type=int, default=20, help="tool calls per episode")
    ap.add_argument("--server", metavar="CMD", help="a stdio server's command line (one string, split as a "
                    "shell would) to time instead of the notes server")
    ap.add_argument("--call-args", default="{}", help="JSON arguments of the timed call (with --server)")
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args(argv)
    import gymnasium as gym

    import envs  # noqa: F401 - registers the lopd/* ids

    kwargs: dict[str, Any] = {"max_steps": args.calls + 1}
    name, arguments = "add_note", {"text": "milk"}
    if args.server:
        probe = gym.make("lopd/mcp-v0", server=args.server, tasks=[{"task_id": "t", "prompt": "p",
                                                                   "check": [{"answer_contains": "x"}]}])
        _, info = probe.reset(seed=0)
        probe.close()
        name, arguments = info["tools"][0]["function"]["name"], json.loads(args.call_args)
        kwargs.update(server=args.server, tasks=[{"task_id": "t", "prompt": "p", "check": [{"answer_contains": "x"}]}])
    mcp = gym.make("lopd/mcp-v0", **kwargs)
    shop = gym.make("lopd/shop-v0", max_steps=args.calls + 1)
    try:
        mcp.reset(seed=0)  # warm-up: imports, the event-loop thread
        shop.reset(seed=0)
        result = {
            "mcp": time_env(mcp, _call(name, arguments), args.episodes, args.calls, close_each=True),
            "in_process": time_env(shop, _call("price", {"item": "apple"}), args.episodes, args.calls, False),
        }
    finally:
        mcp.close()
        shop.close()
    result["ratio_step"] = round(result["mcp"]["step"]["median_ms"] / result["in_process"]["step"]["median_ms"], 1)
    result["meta"] = run_meta(__file__, argv, server=args.server or "envs/mcp/example_server.py")
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
