"""Agreement of our BFCL-v3 verifier with the OFFICIAL checker (bfcl-eval==2025.8.6.2).

Needs a throwaway virtualenv with the official package and its dependencies (never a project
dependency); without it the script says so and exits 0::

    python3.11 -m venv /tmp/bfcl_official
    /tmp/bfcl_official/bin/pip install bfcl-eval==2025.8.6.2 soundfile
    .venv/bin/python benchmarks/bfcl_official_agreement.py [--official-python /tmp/bfcl_official/bin/python]
        [--categories simple,java,...] [--formats prompt,fc] [--limit N] [--out disagreements.jsonl]

Cases: for every entry, the ground-truth replay plus the mutations of ``benchmarks/bfcl_mutations.py``
(relevance categories: call / no-call variants), in both result formats. Prints, per category and
format, how many verdicts (valid True/False) agree, and lists disagreements.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bfcl_mutations import multi_turn_cases, relevance_cases, single_turn_cases
from benchmarks.mutations import fuzz_text
from envs.bfcl.data import CATEGORIES, data_root, is_multi_turn, is_relevance, load_entries
from envs.bfcl.replay import ground_truth_output
from envs.bfcl.scoring import score_entry

DEFAULT_PYTHON = "/tmp/bfcl_official/bin/python"
RUNNER = ROOT / "benchmarks" / "bfcl_official_runner.py"
OFFICIAL_MODELS = {"prompt": "gpt-4o-2024-11-20", "fc": "gpt-4o-2024-11-20-FC"}


def build_cases(categories: list[str], formats: list[str], limit: int | None) -> list[dict]:
    cases = []
    for cat in categories:
        for entry in load_entries(cat)[:limit]:
            for fmt in formats:
                if is_multi_turn(cat):
                    gen = multi_turn_cases(entry, fmt)
                elif is_relevance(cat):
                    gen = relevance_cases(entry, fmt)
                else:
                    gen = single_turn_cases(entry, fmt)
                for label, result in gen:
                    cases.append(
                        {
                            "key": f"{entry.id}|{fmt}|{label}",
                            "id": entry.id,
                            "category": cat,
                            "fmt": fmt,
                            "label": label,
                            "result": result,
                        }
                    )
    return cases


_FUZZ_CHARS = "[](){}'\",=.:-_ \n`0123456789abcxyzTFN\\é中+*/<>;"


def _mutate(text: str, rng: random.Random) -> str:
    return fuzz_text(text, rng, _FUZZ_CHARS)


def fuzz_cases(categories: list[str], formats: list[str], n: int, seed: int = 0) -> list[dict]:
    """Character-level mutations of ground-truth outputs (and of their JSON argument strings)."""
    rng = random.Random(seed)
    cases = []
    for cat in categories:
        entries = [e for e in load_entries(cat) if e.answer is not None] or list(load_entries(cat))
        for i in range(n):
            entry = rng.choice(entries)
            fmt = rng.choice(formats)
            base = (
                ground_truth_output(entry, fmt)
                if entry.answer is not None
                else ([] if fmt == "fc" else f"[{(entry.functions or [{'name': 'f'}])[0]['name']}()]")
            )
            if is_multi_turn(cat):
                turns = json.loads(json.dumps(base))
                t = rng.randrange(len(turns))
                if turns[t]:
                    step = turns[t][0]
                    turns[t][0] = (
                        _mutate(step, rng)
                        if isinstance(step, str)
                        else [{k: _mutate(v, rng)} for c in step for k, v in c.items()]
                    )
                result = turns
            elif fmt == "fc":
                result = [
                    {(_mutate(k, rng) if rng.random() < 0.2 else k): _mutate(v, rng)}
                    for c in base
                    for k, v in c.items()
                ]
            else:
                result = _mutate(base, rng)
            cases.append(
                {
                    "key": f"{entry.id}|{fmt}|fuzz{i}",
                    "id": entry.id,
                    "category": cat,
                    "fmt": fmt,
                    "label": "fuzz",
                    "result": result,
                }
            )
    return cases


def run_official(python: str, cases: list[dict]) -> tuple[dict[str, dict], dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        cin, cout = Path(tmp) / "cases.jsonl", Path(tmp) / "out.jsonl"
        with open(cin, "w", encoding="utf-8") as f:
            f.writelines(
                json.dumps({k: c[k] for k in ("key", "id", "category", "fmt", "result")}) + "\n"
                for c in cases
            )
        subprocess.run(
            [python, str(RUNNER), str(cin), str(cout), str(data_root())],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        with open(cout, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
    timing = rows.pop()["timing"]
    return {r["key"]: r for r in rows}, timing


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--official-python", default=DEFAULT_PYTHON)
    ap.add_argument("--categories", default=",".join(CATEGORIES))
    ap.add_argument("--formats", default="prompt,fc")
    ap.add_argument("--limit", type=int, default=None, help="entries per category")
    ap.add_argument("--fuzz", type=int, default=0, help="also N character-level fuzz cases per category")
    ap.add_argument("--no-mutations", action="store_true", help="only the fuzz cases")
    ap.add_argument("--out", default=None, help="write disagreements as JSONL here")
    return ap


def _tally(cases: list[dict], official: dict[str, dict], ours: dict[str, Any]) -> dict[str, Any]:
    """Per (category, format): agreeing verdicts, cases and official crashes; error-type agreement on
    agreeing verdicts; official verdicts per case label; every disagreement."""
    agree: Counter = Counter()
    total: Counter = Counter()
    crashes: Counter = Counter()
    etype_agree = 0
    disagreements = []
    by_label: dict[str, Counter] = defaultdict(Counter)
    for c in cases:
        o, v = official[c["key"]], ours[c["key"]]
        k = (c["category"], c["fmt"])
        total[k] += 1
        by_label[c["label"]][o["valid"]] += 1
        if o["error_type"].startswith("official_crash"):
            crashes[k] += 1
        if o["valid"] == v.valid:
            agree[k] += 1
            etype_agree += (
                v.valid or o["error_type"] == v.error_type or o["error_type"].startswith("official_crash")
            )
        else:
            disagreements.append({"key": c["key"], "official": o, "ours": v.as_dict(), "result": c["result"]})
    return {
        "agree": agree,
        "total": total,
        "crashes": crashes,
        "etype_agree": etype_agree,
        "by_label": by_label,
        "disagreements": disagreements,
    }


def _print_tally(t: dict[str, Any], n_cases: int) -> None:
    agree, total, crashes, by_label = t["agree"], t["total"], t["crashes"], t["by_label"]
    print(f"{'category':<26}{'fmt':<8}{'agree':>8}{'total':>8}{'official crash':>16}")
    for k in sorted(total):
        print(f"{k[0]:<26}{k[1]:<8}{agree[k]:>8}{total[k]:>8}{crashes[k]:>16}")
    n_agree = sum(agree.values())
    print(
        f"verdict agreement: {n_agree}/{n_cases}; error_type agreement on agreeing verdicts: "
        f"{t['etype_agree']}/{n_agree}"
    )
    print("official verdicts by case label (valid True/False):")
    for label in sorted(by_label):
        print(f"  {label:<24} {by_label[label][True]:>6} / {by_label[label][False]:>6}")
    for d in t["disagreements"][:30]:
        print("DISAGREE", json.dumps(d, default=str)[:600])


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not Path(args.official_python).exists():
        print(
            f"SKIP: official checker venv not found at {args.official_python} (see this script's docstring)"
        )
        return 0
    cats = [c for c in args.categories.split(",") if c]
    fmts = [f for f in args.formats.split(",") if f]
    cases = [] if args.no_mutations else build_cases(cats, fmts, args.limit)
    if args.fuzz:
        cases += fuzz_cases(cats, fmts, args.fuzz)
    entries = {e.id: e for c in cats for e in load_entries(c)}
    t0 = time.time()
    ours = {
        c["key"]: score_entry(entries[c["id"]], c["result"], c["fmt"], model_name=OFFICIAL_MODELS[c["fmt"]])
        for c in cases
    }
    t_ours = time.time() - t0
    official, _ = run_official(args.official_python, cases)
    t = _tally(cases, official, ours)
    print(f"cases: {len(cases)}  (ours: {t_ours:.1f} s)")
    _print_tally(t, len(cases))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(d, default=str) + "\n" for d in t["disagreements"])
    return 0 if not t["disagreements"] else 1


if __name__ == "__main__":
    sys.exit(main())
