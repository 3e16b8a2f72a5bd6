"""Throughput of the BFCL-v3 verifier (entries/s per category family), ours vs the official checker.

    .venv/bin/python benchmarks/bench_bfcl_verifier.py [--repeats 3] [--formats prompt,fc]
        [--official-python /tmp/bfcl_official/bin/python]

Inputs: the ground-truth replay of every entry (relevance categories: a no-call text answer), in each
result format. Each repeat times our ``score_entry`` (decoding + checking) over all entries, then the
official checker on the same entries in the throwaway venv (``benchmarks/bfcl_official_runner.py``,
timing decoding + checking only, per family). Families: ast (single-turn AST categories), relevance
(irrelevance, live_irrelevance, live_relevance), multi_turn. Prints medians and ratios; the official
side is skipped with a message when its venv is absent.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envs.bfcl.data import CATEGORIES, data_root, is_multi_turn, is_relevance, load_entries  # noqa: E402
from envs.bfcl.replay import ground_truth_output  # noqa: E402
from envs.bfcl.scoring import score_entry  # noqa: E402

RUNNER = ROOT / "benchmarks" / "bfcl_official_runner.py"
OFFICIAL_MODELS = {"prompt": "gpt-4o-2024-11-20", "fc": "gpt-4o-2024-11-20-FC"}


def family(category: str) -> str:
    return "multi_turn" if is_multi_turn(category) else "relevance" if is_relevance(category) else "ast"


def build(fmt: str) -> list[dict]:
    cases = []
    for cat in CATEGORIES:
        for e in load_entries(cat):
            result = ground_truth_output(e, fmt) if e.answer is not None else "No function applies."
            cases.append({"key": e.id, "id": e.id, "category": cat, "fmt": fmt, "result": result})
    return cases


def time_ours(cases: list[dict]) -> dict[str, float]:
    entries = {e.id: e for c in CATEGORIES for e in load_entries(c)}
    spent: dict[str, float] = {}
    for c in cases:
        t0 = time.perf_counter()
        score_entry(entries[c["id"]], c["result"], c["fmt"], OFFICIAL_MODELS[c["fmt"]])
        fam = family(c["category"])
        spent[fam] = spent.get(fam, 0.0) + time.perf_counter() - t0
    return spent


def time_official(python: str, cases: list[dict]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        cin, cout = Path(tmp) / "cases.jsonl", Path(tmp) / "out.jsonl"
        with open(cin, "w", encoding="utf-8") as f:
            for c in cases:
                f.write(json.dumps(c) + "\n")
        subprocess.run([python, str(RUNNER), str(cin), str(cout), str(data_root())], check=True,
                       stdout=subprocess.DEVNULL)
        return json.loads(open(cout, encoding="utf-8").read().splitlines()[-1])["timing"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--formats", default="prompt,fc")
    ap.add_argument("--official-python", default="/tmp/bfcl_official/bin/python")
    args = ap.parse_args(argv)
    have_official = Path(args.official_python).exists()
    if not have_official:
        print(f"official checker venv not found at {args.official_python}: timing ours only")
    print(f"machine: {platform.platform()}, python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    print(f"{'fmt':<7}{'family':<12}{'entries':>8}{'ours e/s':>12}{'official e/s':>14}{'ratio':>8}")
    for fmt in [f for f in args.formats.split(",") if f]:
        cases = build(fmt)
        counts: dict[str, int] = {}
        for c in cases:
            counts[family(c["category"])] = counts.get(family(c["category"]), 0) + 1
        ours: dict[str, list[float]] = {}
        official: dict[str, list[float]] = {}
        for _ in range(args.repeats):
            for fam, s in time_ours(cases).items():
                ours.setdefault(fam, []).append(s)
            if have_official:
                for fam, s in time_official(args.official_python, cases).items():
                    official.setdefault(fam, []).append(s)
        for fam in ("ast", "relevance", "multi_turn"):
            ours_rate = counts[fam] / statistics.median(ours[fam])
            if fam in official:
                off_rate = counts[fam] / statistics.median(official[fam])
                print(f"{fmt:<7}{fam:<12}{counts[fam]:>8}{ours_rate:>12.0f}{off_rate:>14.0f}{ours_rate / off_rate:>8.2f}")
            else:
                print(f"{fmt:<7}{fam:<12}{counts[fam]:>8}{ours_rate:>12.0f}{'-':>14}{'-':>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
