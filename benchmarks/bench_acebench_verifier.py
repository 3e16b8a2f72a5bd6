"""Throughput of the ACEBench verifier (entries/s per category family), ours vs the official evaluator.

    .venv/bin/python benchmarks/bench_acebench_verifier.py [--repeats 7] [--languages en,zh]
        [--official-python /tmp/acebench_official/venv/bin/python]

Inputs: every entry's own answer as a model output (normal: the prompt-format string; special:
the expected sentence; agent: the saved states and process of its mile_stone replay). Each repeat
times ``envs.acebench.scoring.verdict`` over all entries of a family (normal: decoding + checking;
special: phrase checks; agent: state check + process accuracy), plus ``agent_replay``: running the
mile_stone messages through our scenario classes and then checking.

Peer, in the same run: ACEBench's official evaluator (GitHub-only) reconstructed in a throwaway
folder, /tmp/acebench_official (how: the docstring of ``benchmarks/acebench_official_runner.py``; the
project never imports it). Each repeat runs ``eval_main``'s category functions on the same entries in
a subprocess, one call per (language, category) as ``eval_main`` does, timing only inside those calls
(Excel reports and score-file writes replaced by no-ops). Prints medians of entries/s and the ratio
ours/official; without the folder only ours is timed. ``agent_replay`` has no official counterpart
(upstream executes scenario classes during inference, not in the evaluator).
"""

from __future__ import annotations

import argparse
import json
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

OFFICIAL_PYTHON = "/tmp/acebench_official/venv/bin/python"


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


def time_family(pairs: list[tuple[Entry, dict]], inner: int = 1) -> float:
    """Seconds per pass over ``pairs`` (``inner`` passes timed together)."""
    t0 = time.perf_counter()
    for _ in range(inner):
        for entry, row in pairs:
            verdict(entry, row)
    return (time.perf_counter() - t0) / inner


def time_agent_replay(pairs: list[tuple[Entry, dict]]) -> float:
    t0 = time.perf_counter()
    for entry, _ in pairs:
        stones = [repair_milestone(s.strip()) for s in milestone_lists(entry)[0]]
        saved, process = replay_agent(entry, stones, repair=False)
        verdict(entry, {"id": entry.id, "result": saved, "process": process})
    return time.perf_counter() - t0


def official_cases(cases: dict[str, list[tuple[Entry, dict]]]) -> list[dict]:
    out = []
    for fam in ("normal", "special", "agent"):
        for e, row in cases[fam]:
            out.append(
                {
                    "key": f"{e.language}|{e.id}",
                    "id": e.id,
                    "category": e.category,
                    "language": e.language,
                    **{k: v for k, v in row.items() if k != "id"},
                }
            )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--languages", default="en,zh")
    ap.add_argument("--official-python", default=OFFICIAL_PYTHON)
    ap.add_argument(
        "--inner",
        default='{"normal": 2, "special": 200, "agent": 40}',
        help="passes per family within one timing (short families need many to be measurable)",
    )
    args = ap.parse_args()
    from benchmarks.acebench_official_agreement import OFFICIAL_DIR, run_official

    have_official = Path(args.official_python).exists() and (OFFICIAL_DIR / "eval_main.py").exists()
    if not have_official:
        print(
            f"official evaluator not found at {OFFICIAL_DIR} (see benchmarks/acebench_official_runner.py): "
            "timing ours only"
        )
    inner = {"normal": 1, "special": 1, "agent": 1, **json.loads(args.inner)}
    cases = build(args.languages.split(","))
    off_cases = official_cases(cases) if have_official else []
    runs: dict[str, list[float]] = {k: [] for k in ("normal", "special", "agent", "agent_replay")}
    official: dict[str, list[float]] = {k: [] for k in ("normal", "special", "agent")}

    def time_ours() -> None:
        for fam in ("normal", "special", "agent"):
            runs[fam].append(len(cases[fam]) / time_family(cases[fam], inner[fam]))
        runs["agent_replay"].append(len(cases["agent"]) / time_agent_replay(cases["agent"]))

    def time_official() -> None:
        _, timing = run_official(args.official_python, off_cases, mode="bench", inner=inner)
        for fam, seconds in timing.items():
            official[fam].append(len(cases[fam]) / seconds)

    for i in range(args.repeats):  # alternate which side goes first: the machine's load drifts
        for step in (time_ours, time_official) if i % 2 == 0 else (time_official, time_ours):
            if step is time_ours or have_official:
                step()
    print(
        f"python {platform.python_version()} on {platform.machine()} ({platform.platform()}), "
        f"{args.repeats} repeats, languages {args.languages}, passes per timing {inner}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}"
    )
    print(
        "| family | entries | ours median entries/s (min-max) | official median entries/s (min-max) "
        "| ratio of medians | paired ratio median (min-max) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for fam, rates in runs.items():
        n = len(cases["agent" if fam == "agent_replay" else fam])
        ours = f"{statistics.median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f})"
        off = official.get(fam) or []
        if off:
            peer = f"{statistics.median(off):,.0f} ({min(off):,.0f}-{max(off):,.0f})"
            ratio = f"{statistics.median(rates) / statistics.median(off):.2f}"
            paired = [a / b for a, b in zip(rates, off)]  # same repeat: similar machine load
            pr = f"{statistics.median(paired):.2f} ({min(paired):.2f}-{max(paired):.2f})"
        else:
            peer, ratio, pr = "-", "-", "-"
        print(f"| {fam} | {n} | {ours} | {peer} | {ratio} | {pr} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
