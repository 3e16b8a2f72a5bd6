"""`lopd stats` over 100k episodes: wall time and peak memory.

    .venv/bin/python benchmarks/bench_stats.py --episodes 100000

Target (issue 9): under 10 s on 2 cores, streaming with bounded memory. Episodes are shaped like
real training traces by default (token ids and log-probs on every step, ~8.6 KB; ``--shape small``
for the first benchmark's ~2.9 KB, ``--file`` for a real trace file). Modes: ``auto`` is what
``lopd stats`` does (parallel workers for large inputs), ``serial`` one process, and the peer
``naive`` builds full Episode dataclasses with read_traces before counting. The synthetic file
goes to $TMPDIR (~800 MiB per 100k realistic episodes).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def synth_small(path: Path, n: int, seed: int = 0) -> None:
    """The first benchmark's episodes (~2.9 KB): first-step token ids only, no log-probs or messages."""
    rng = random.Random(seed)
    tools = ["get_user", "list_orders", "cancel_order", "refund", "search", "update_address"]
    with open(path, "w") as f:
        for i in range(n):
            steps = []
            for j in range(rng.randint(1, 8)):
                calls = [{"name": rng.choice(tools), "arguments": {"id": rng.randint(1, 20), "note": "x" * rng.randint(0, 40)},
                          "parse_error": None, "executed": k == 0, "result": "ok " * rng.randint(1, 30),
                          "error": None if rng.random() > 0.1 else "Error: boom"} for k in range(rng.randint(0, 3))]
                steps.append({"index": j, "text": "<tool_call>...</tool_call>" * len(calls),
                              "token_ids": [rng.randint(0, 5000) for _ in range(rng.randint(20, 120))] if j == 0 else None,
                              "logprobs": None, "calls": calls, "parse_error": None, "observation": "ok",
                              "observation_token_ids": None, "reward": 0.0, "terminated": False, "truncated": False,
                              "timings": {}})
            ep = {"env_id": "lopd/envscaler-v0", "task_id": f"t{i % 500}", "split": "train", "seed": i, "messages": [],
                  "tools": [], "prompt_token_ids": None, "steps": steps, "reward": rng.random(), "terminated": True,
                  "truncated": False, "timings": {}, "meta": {"run": "a" if i % 2 else "b"}, "version": 1}
            f.write(json.dumps(ep, separators=(",", ":")) + "\n")


TOOLS = {  # name: (description, parameters): the micro world's shop, as its traces carry it
    "find_customer": ("Find a customer by full name, with their orders.", ["customer"]),
    "search_products": ("List products whose name contains the query.", ["query"]),
    "create_order": ("Create an order (as a draft).", ["customer_id", "product_id", "quantity"]),
    "confirm_order": ("Confirm a draft order; its items leave the stock.", ["order_id"]),
    "cancel_order": ("Cancel an order; confirmed items go back to stock.", ["order_id"]),
    "quick_buy": ("Buy a product by name at once, without an order.", ["product_name", "quantity"]),
}
SCHEMAS = [{"type": "function", "function": {"name": name, "description": desc, "parameters": {
    "type": "object", "properties": {p: {"type": "string", "description": f"The {p.replace('_', ' ')}."} for p in params},
    "required": params}}} for name, (desc, params) in TOOLS.items()]
SYSTEM = ("An online shop with customers, products and orders.\nTools:\n"
          + "".join(f"{n}({', '.join(p)})\n" for n, (_, p) in TOOLS.items())
          + 'Call one tool per turn as <tool_call>{"name": ..., "arguments": {...}}</tool_call>. Reply Task Completed when done.')
NAMES = ["Omar Zhou", "Vik Rossi", "Ana Silva", "Kenji Ito", "Lea Moreau", "Sam Okafor"]


def synth_realistic(path: Path, n: int, seed: int = 0) -> None:
    """Episodes shaped like real training traces (~8.6 KB; the micro world's runs/*/traces.jsonl
    hold 8.6-12 KB an episode): 2-6 steps, each with its sampled token ids and log-probs, observation
    token ids and timings; the chat messages, the tool schemas and the prompt token ids. A few
    parse and tool errors and double calls, so every metric has values."""
    rng = random.Random(seed)

    def ids(lo: int, hi: int) -> list[int]:
        return [rng.randint(0, 2300) for _ in range(rng.randint(lo, hi))]

    with open(path, "w") as f:
        for i in range(n):
            who = rng.choice(NAMES)
            messages = [{"role": "system", "content": SYSTEM},
                        {"role": "user", "content": f"{who} wants to buy {rng.randint(1, 5)} oak desk. Order it for them."
                                                    f'\nValues: "customer": "{who}", "query": "oak desk", "quantity": 3.'}]
            steps = []
            n_steps = rng.choices([2, 3, 4, 5, 6], weights=[3, 15, 12, 19, 1])[0]
            for j in range(n_steps):
                last = j == n_steps - 1
                calls = []
                for _ in range(0 if last else rng.choices([1, 2], weights=[30, 1])[0]):
                    name = rng.choice(list(TOOLS))
                    args = {p: rng.choice(NAMES) if p == "customer" else f"X{rng.randint(1, 9)}" for p in TOOLS[name][1]}
                    bad, err = rng.random() < 0.03, rng.random() < 0.1
                    calls.append({"name": None if bad else name, "arguments": None if bad else args,
                                  "parse_error": "JSONDecodeError: Expecting value" if bad else None, "executed": not bad,
                                  "result": None if bad or err else str({"success": True, "data": [
                                      {"customer_id": f"C{rng.randint(100, 999)}", "name": who, "orders": []}]}),
                                  "error": "Error: unknown order id" if err and not bad else None})
                text = "".join(f"<tool_call>\n{json.dumps({'name': c['name'], 'arguments': c['arguments']})}\n</tool_call>"
                               for c in calls) or "Task Completed"
                result = "".join(c["result"] or c["error"] or "" for c in calls)
                obs = "Task finished" if last else f"<tool_response>\n{result}\n</tool_response>"
                tokens = ids(2, 4) if last else ids(14, 34)
                steps.append({"index": j, "text": text, "token_ids": tokens,
                              "logprobs": [0.0 if rng.random() < 0.1 else -rng.random() ** 4 * 3 for _ in tokens],
                              "calls": calls, "parse_error": None, "observation": obs,
                              "observation_token_ids": [] if last else ids(28, 52),
                              "reward": float(last) * rng.choice([0.0, 0.5, 1.0]), "terminated": last, "truncated": False,
                              "timings": {"generate": rng.uniform(0.2, 2.0), "env": rng.uniform(1e-4, 2e-3)}})
                messages.append({"role": "assistant", "content": text})
                if not last:
                    messages.append({"role": "tool", "name": calls[0]["name"], "content": result})
            ep = {"env_id": "lopd/micro-v0", "task_id": f"micro_shop-train-task_{i % 600}", "split": "train",
                  "seed": rng.randint(0, 2**31), "messages": messages, "tools": SCHEMAS, "prompt_token_ids": ids(70, 100),
                  "steps": steps, "reward": steps[-1]["reward"], "terminated": True, "truncated": False,
                  "timings": {"generate": rng.uniform(2, 8), "env": rng.uniform(1e-3, 5e-3), "wall": rng.uniform(2, 9)},
                  "meta": {"run": "a" if i % 2 else "b", "learner": "lopd", "step": i // 64, "phase": "train",
                           "generations": i // 8 * 8, "sample": i % 8}, "version": 1}
            f.write(json.dumps(ep, separators=(",", ":")) + "\n")


CHILD = """
import resource, sys, time
t = time.perf_counter()
if sys.argv[1] == "naive":
    from envs.trace import read_traces
    from harness.stats import episode_stats
    import json
    eps = list(read_traces(sys.argv[2]))           # naive: materialise every episode first
    rows = [episode_stats(json.loads(e.to_json())) for e in eps]
else:
    from harness.stats import collect, table_rows
    from harness.stats.parallel import default_workers
    workers = 1 if sys.argv[1] == "serial" else default_workers([sys.argv[2]])
    rows = table_rows(collect([sys.argv[2]], by="run", workers=workers))
wall = time.perf_counter() - t
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(wall, me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, me.ru_maxrss / 1024, kids.ru_maxrss / 1024,
      1 if sys.argv[1] == "naive" else workers)
"""
MODES = {"auto": "collect, default workers", "serial": "collect, workers=1", "naive": "read_traces, then count"}


def measure(mode: str, path: Path) -> tuple[float, ...]:
    """Wall s, CPU s (the process and its workers), peak RSS MiB of the process and of its largest
    worker, number of processes reading."""
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(path)], capture_output=True, text=True, check=True)
    return tuple(map(float, out.stdout.split()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--shape", choices=["realistic", "small"], default="realistic",
                    help="realistic: like real training traces (~8.6 KB); small: the first benchmark's (~2.9 KB)")
    ap.add_argument("--file", type=Path, help="time this trace file instead of synthetic episodes")
    ap.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = args.file or Path(d) / "traces.jsonl"
        if not args.file:
            (synth_realistic if args.shape == "realistic" else synth_small)(path, args.episodes)
        with open(path, "rb") as f:
            episodes = sum(1 for line in f if line.strip())
        size = path.stat().st_size
        print(f"{episodes} episodes ({args.file or args.shape}), {size / 2**20:.0f} MiB of JSONL, "
              f"{size / episodes:.0f} bytes per episode; {os.cpu_count()} CPUs")
        results = {}
        for mode in args.modes:
            runs = [measure(mode, path) for _ in range(args.repeats)]
            wall, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
            rss, worker_rss, workers = max(r[2] for r in runs), max(r[3] for r in runs), int(runs[0][4])
            results[mode] = wall, rss
            print(f"{mode:6s} ({MODES[mode]}, {workers} worker{'s' * (workers > 1)}): median {wall:.2f} s wall, "
                  f"{cpu:.2f} s CPU, {wall / episodes * 1e5:.2f} s per 100k; peak RSS {rss:.0f} MiB"
                  + (f", largest worker {worker_rss:.0f} MiB" if workers > 1 else ""))
        if "auto" in results and "naive" in results:
            (a, ra), (b, rb) = results["auto"], results["naive"]
            print(f"speed-up over naive: {b / a:.2f}x; memory ratio: {rb / ra:.2f}x")


if __name__ == "__main__":
    main()
