"""Throughput of the ACEBench verifier (entries/s per category family) on ground-truth outputs.

    .venv/bin/python benchmarks/bench_acebench_verifier.py [--repeats 7] [--languages en,zh]

Inputs: every entry's own answer as a model output (normal: the prompt-format string; special:
the expected sentence; agent: the saved states and process of its mile_stone replay). Each repeat
times ``envs.acebench.scoring.verdict`` over all entries of a family (normal: decoding + checking;
special: phrase checks; agent: state check + process accuracy), plus ``agent_replay``: running the
mile_stone messages through our scenario classes and then checking. Prints medians of entries/s.

No peer is timed: ACEBench's official evaluator is GitHub-only (not on PyPI), so it cannot be
installed offline on this machine.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envs.acebench.data import ALL_CATEGORIES, Entry, load_category  # noqa: E402
from envs.acebench.ground_truth import (
    milestone_lists,
    normal_output,
    repair_milestone,  # noqa: E402
    replay_agent,
    special_output,
)
from envs.acebench.scoring import verdict  # noqa: E402


def build(languages: list[str]) -> dict[str, list[tuple[Entry, dict]]]:
    cases: dict[str, list[tuple[Entry, dict]]] = {"normal": [], "special": [], "agent": []}
    for lang in languages:
        for cat in ALL_CATEGORIES:
            for e in load_category(lang, cat):
                if e.family == "normal":
                    gt = e.ground_truth[0] if isinstance(e.ground_truth, list) else e.ground_truth
                    row = {"id": e.id, "result": normal_output(gt)}
                elif e.family == "special":
                    row = {"id": e.id, "result": special_output(cat, e.ground_truth)}
                else:
                    saved, process = replay_agent(e, milestone_lists(e)[0])
                    row = {"id": e.id, "result": saved, "process": process}
                cases[e.family].append((e, row))
    return cases


def time_family(pairs: list[tuple[Entry, dict]]) -> float:
    t0 = time.perf_counter()
    for entry, row in pairs:
        verdict(entry, row)
    return time.perf_counter() - t0


def time_agent_replay(pairs: list[tuple[Entry, dict]]) -> float:
    t0 = time.perf_counter()
    for entry, _ in pairs:
        stones = [repair_milestone(s.strip()) for s in milestone_lists(entry)[0]]
        saved, process = replay_agent(entry, stones, repair=False)
        verdict(entry, {"id": entry.id, "result": saved, "process": process})
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--languages", default="en,zh")
    args = ap.parse_args()
    cases = build(args.languages.split(","))
    runs: dict[str, list[float]] = {k: [] for k in ("normal", "special", "agent", "agent_replay")}
    for _ in range(args.repeats):
        for fam in ("normal", "special", "agent"):
            runs[fam].append(len(cases[fam]) / time_family(cases[fam]))
        runs["agent_replay"].append(len(cases["agent"]) / time_agent_replay(cases["agent"]))
    print(
        f"python {platform.python_version()} on {platform.machine()}, {args.repeats} repeats, "
        f"languages {args.languages}"
    )
    print("| family | entries | median entries/s | min | max |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for fam, rates in runs.items():
        n = len(cases["agent" if fam == "agent_replay" else fam])
        print(f"| {fam} | {n} | {statistics.median(rates):,.0f} | {min(rates):,.0f} | {max(rates):,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
