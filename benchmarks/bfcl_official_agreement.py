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
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bfcl_mutations import multi_turn_cases, relevance_cases, single_turn_cases  # noqa: E402
from envs.bfcl.data import CATEGORIES, data_root, is_multi_turn, is_relevance, load_entries  # noqa: E402
from envs.bfcl.multi_turn import DEFAULT_MODEL_NAME  # noqa: E402
from envs.bfcl.scoring import score_entry  # noqa: E402

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
                    cases.append({"key": f"{entry.id}|{fmt}|{label}", "id": entry.id, "category": cat,
                                  "fmt": fmt, "label": label, "result": result})
    return cases


def run_official(python: str, cases: list[dict]) -> tuple[dict[str, dict], dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        cin, cout = Path(tmp) / "cases.jsonl", Path(tmp) / "out.jsonl"
        with open(cin, "w", encoding="utf-8") as f:
            for c in cases:
                f.write(json.dumps({k: c[k] for k in ("key", "id", "category", "fmt", "result")}) + "\n")
        subprocess.run([python, str(RUNNER), str(cin), str(cout), str(data_root())], check=True,
                       stdout=subprocess.DEVNULL)
        rows = [json.loads(line) for line in open(cout, encoding="utf-8")]
    timing = rows.pop()["timing"]
    return {r["key"]: r for r in rows}, timing


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--official-python", default=DEFAULT_PYTHON)
    ap.add_argument("--categories", default=",".join(CATEGORIES))
    ap.add_argument("--formats", default="prompt,fc")
    ap.add_argument("--limit", type=int, default=None, help="entries per category")
    ap.add_argument("--out", default=None, help="write disagreements as JSONL here")
    args = ap.parse_args(argv)
    if not Path(args.official_python).exists():
        print(f"SKIP: official checker venv not found at {args.official_python} (see this script's docstring)")
        return 0
    cats = [c for c in args.categories.split(",") if c]
    fmts = [f for f in args.formats.split(",") if f]
    cases = build_cases(cats, fmts, args.limit)
    entries = {e.id: e for c in cats for e in load_entries(c)}
    t0 = time.time()
    ours = {c["key"]: score_entry(entries[c["id"]], c["result"], c["fmt"],
                                  model_name=OFFICIAL_MODELS[c["fmt"]]) for c in cases}
    t_ours = time.time() - t0
    official, _ = run_official(args.official_python, cases)
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
            etype_agree += (v.valid or o["error_type"] == v.error_type
                            or o["error_type"].startswith("official_crash"))
        else:
            disagreements.append({"key": c["key"], "official": o, "ours": v.as_dict(),
                                  "result": c["result"]})
    print(f"cases: {len(cases)}  (ours: {t_ours:.1f} s)")
    print(f"{'category':<26}{'fmt':<8}{'agree':>8}{'total':>8}{'official crash':>16}")
    for k in sorted(total):
        print(f"{k[0]:<26}{k[1]:<8}{agree[k]:>8}{total[k]:>8}{crashes[k]:>16}")
    n_agree = sum(agree.values())
    print(f"verdict agreement: {n_agree}/{len(cases)}; error_type agreement on agreeing verdicts: "
          f"{etype_agree}/{n_agree}")
    print("official verdicts by case label (valid True/False):")
    for label in sorted(by_label):
        print(f"  {label:<24} {by_label[label][True]:>6} / {by_label[label][False]:>6}")
    for d in disagreements[:30]:
        print("DISAGREE", json.dumps(d, default=str)[:600])
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            for d in disagreements:
                f.write(json.dumps(d, default=str) + "\n")
    return 0 if not disagreements else 1


if __name__ == "__main__":
    sys.exit(main())
