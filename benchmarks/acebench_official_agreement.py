"""Agreement of our ACEBench verifier with the OFFICIAL evaluator, run in a throwaway environment.

The official evaluator is GitHub-only; its reconstruction lives in /tmp/acebench_official (how to
make it: the docstring of ``benchmarks/acebench_official_runner.py``; upstream code is never committed
here and the project never imports it). Without it this script says so and exits 0::

    .venv/bin/python benchmarks/acebench_official_agreement.py [--languages en,zh]
        [--categories normal_atom_bool,...] [--limit N] [--fuzz N] [--out disagreements.jsonl]
        [--official-python /tmp/acebench_official/venv/bin/python]

Cases: for every entry, the ground truth plus the mutations of ``benchmarks/acebench_mutations.py``,
and ``--fuzz N`` seeded character-level mutations per category. Ours runs in-process
(``envs.acebench.scoring.verdict``); the official functions of ``eval_main.py`` run in a subprocess,
each case scored alone. Prints, per category, how many verdicts (valid) agree, how many error types
agree where both are invalid (our "checker_error" matches an official crash), how many agent process
accuracies agree (rounded to 3, as upstream reports them), and lists every disagreement.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.acebench_mutations import (
    NO_PROCESS,
    agent_cases,
    fuzz_cases,
    normal_cases,
    special_cases,
)
from benchmarks.acebench_synthetic import CATEGORY as SYNTHETIC_CATEGORY
from benchmarks.acebench_synthetic import synthetic_items
from envs.acebench.data import ALL_CATEGORIES, LANGUAGES, Entry, family_of, load_category
from envs.acebench.scoring import CategoryScore, Verdict, category_score, summary, verdict
from envs.data import data_dir

OFFICIAL_DIR = Path("/tmp/acebench_official")
DEFAULT_PYTHON = OFFICIAL_DIR / "venv" / "bin" / "python"
RUNNER = ROOT / "benchmarks" / "acebench_official_runner.py"
LABELS = {"disagreements": "DISAGREE", "etype_mismatches": "ETYPE", "process_mismatches": "PROCESS"}
MISMATCH_KINDS = tuple(LABELS)
MUTATORS = {"normal": normal_cases, "special": special_cases, "agent": agent_cases}


def build_cases(
    languages: list[str],
    categories: list[str],
    limit: int | None,
    fuzz: int,
    seed: int = 0,
    mutations: bool = True,
) -> list[dict]:
    rng = random.Random(seed)
    cases = []

    def add(entry, label, result, process):
        case = {
            "key": f"{entry.language}|{entry.id}|{label}",
            "id": entry.id,
            "category": entry.category,
            "language": entry.language,
            "label": label.split(":")[0],
            "result": result,
        }
        if process is not None and process != NO_PROCESS:
            case["process"] = process
        cases.append(case)

    for lang in languages:
        for cat in categories:
            entries = list(load_category(lang, cat))[:limit]
            if mutations:
                for e in entries:
                    for label, result, process in MUTATORS[e.family](e):
                        add(e, label, result, process)
            for e, (label, result, process) in fuzz_cases(entries, fuzz, rng):
                add(e, label, result, process)
    seen: set[str] = set()
    unique = []
    for c in cases:  # a mutation may repeat a label on one entry; keep keys unique
        k, n = c["key"], 1
        while c["key"] in seen:
            n += 1
            c["key"] = f"{k}#{n}"
        seen.add(c["key"])
        unique.append(c)
    return unique


def write_synthetic(root: Path) -> tuple[list[dict], dict[tuple[str, str], Entry]]:
    """Write the synthetic entries as a data folder under ``root``; (cases, entries by (lang, id))."""
    lang_dir = root / "data_en"
    (lang_dir / "possible_answer").mkdir(parents=True, exist_ok=True)
    cases, entries = [], {}
    with (
        open(lang_dir / f"data_{SYNTHETIC_CATEGORY}.json", "w", encoding="utf-8") as fq,
        open(lang_dir / "possible_answer" / f"data_{SYNTHETIC_CATEGORY}.json", "w", encoding="utf-8") as fa,
    ):
        for q, a, outputs in synthetic_items():
            fq.write(json.dumps(q, ensure_ascii=False) + "\n")
            fa.write(json.dumps(a, ensure_ascii=False) + "\n")
            entries[("en", q["id"])] = Entry(
                id=q["id"],
                category=SYNTHETIC_CATEGORY,
                language="en",
                question=q["question"],
                functions=list(q["function"] or []),
                ground_truth=a["ground_truth"],
            )
            for label, result in outputs:
                kind = "known_gap" if label.startswith("gap:") else "synthetic"
                cases.append(
                    {
                        "key": f"synthetic|{q['id']}|{label}",
                        "id": q["id"],
                        "category": SYNTHETIC_CATEGORY,
                        "language": "en",
                        "label": kind,
                        "result": result,
                    }
                )
    return cases, entries


def run_official(
    python: str,
    cases: list[dict],
    mode: str = "verdicts",
    timeout: float | None = None,
    data_root: Path | None = None,
    inner: dict[str, int] | None = None,
) -> tuple[list[dict], dict[str, float]]:
    """Run the official runner on ``cases``; (output rows, timing per family; in bench mode per pass,
    each (language, category) group scored ``inner[family]`` times)."""
    data_root = data_root or data_dir() / "acebench" / "data_all"
    with tempfile.TemporaryDirectory() as tmp:
        cin, cout = Path(tmp) / "cases.jsonl", Path(tmp) / "out.jsonl"
        with open(cin, "w", encoding="utf-8") as f:
            f.writelines(
                json.dumps({k: v for k, v in c.items() if k != "label"}, ensure_ascii=False) + "\n"
                for c in cases
            )
        subprocess.run(
            [
                python,
                "-W",
                "ignore::SyntaxWarning",
                str(RUNNER),
                str(cin),
                str(cout),
                str(data_root),
                "--official-dir",
                str(OFFICIAL_DIR),
                "--mode",
                mode,
                "--inner",
                json.dumps(inner or {}),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
        )
        with open(cout, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
    timing = rows.pop()["timing"]
    return rows, timing


def etype_agrees(ours: str, official: str) -> bool:
    return ours == official or (ours == "checker_error" and official.startswith("official_"))


def round_cases(cases: list[dict], rounds: int, seed: int = 0, exclude: set[str] = frozenset()) -> list[dict]:
    """Whole result sets for category accuracies: round 0 holds every entry's ground truth, later
    rounds one randomly chosen case per entry; entries keep their data order. Cases in ``exclude``
    (those the official evaluator crashes on, which would crash the whole category) are not used."""
    rng = random.Random(seed)
    per_entry: dict[tuple[str, str, str], list[dict]] = {}
    for c in cases:
        if c["label"] not in ("synthetic", "known_gap") and c["key"] not in exclude:
            per_entry.setdefault((c["language"], c["category"], c["id"]), []).append(c)
    out = []
    for r in range(rounds):
        for lang, cat in dict.fromkeys((k[0], k[1]) for k in per_entry):
            for e in load_category(lang, cat):
                options = per_entry.get((lang, cat, e.id))
                if not options:
                    continue
                gt = [c for c in options if c["label"] == "gt"]
                pick = gt[0] if r == 0 and gt else rng.choice(options)
                out.append({**pick, "round": r})
    return out


def _our_verdict(case: dict, entries: dict[tuple[str, str], Entry]) -> Verdict:
    """Our verdict on one case, given as the result line upstream reads (process only when set)."""
    row = {"id": case["id"], "result": case["result"]}
    if "process" in case:
        row["process"] = case["process"]
    return verdict(entries[(case["language"], case["id"])], row)


def _our_category_score(
    category: str, group: list[dict], entries: dict[tuple[str, str], Entry]
) -> CategoryScore:
    """Our accuracies for one category's whole result set ``group``."""
    return category_score(category, [_our_verdict(c, entries) for c in group], [c["id"] for c in group])


def compare_categories(rounds: list[dict], official_rows: list[dict], entries: dict) -> list[dict]:
    """Our category accuracies next to the official ones, per (round, language, category)."""
    groups: dict[tuple[int, str, str], list[dict]] = {}
    for c in rounds:
        groups.setdefault((c["round"], c["language"], c["category"]), []).append(c)
    official = {(r["round"], r["language"], r["category"]): r for r in official_rows}
    out = []
    for key, group in groups.items():
        ours = _our_category_score(key[2], group, entries)
        o = official[key]
        row = {
            "round": key[0],
            "language": key[1],
            "category": key[2],
            "ours": ours.accuracy,
            "official": o["accuracy"],
            "ours_process": ours.process_accuracy,
            "official_process": o.get("process_accuracy"),
        }
        row["agree"] = ours.accuracy == o["accuracy"] and (
            "process_accuracy" not in o or ours.process_accuracy == o["process_accuracy"]
        )
        out.append(row)
    return out


def compare_summaries(rounds: list[dict], official_rows: list[dict], entries: dict) -> list[dict]:
    """Our summary table next to the row upstream's generate_result_csv writes, per (round, language)."""
    groups: dict[tuple[int, str], dict[str, list[dict]]] = {}
    for c in rounds:
        groups.setdefault((c["round"], c["language"]), {}).setdefault(c["category"], []).append(c)
    official = {(r["round"], r["language"]): r["summary"] for r in official_rows}
    out = []
    for key, by_cat in groups.items():
        scores = {}
        for cat, group in by_cat.items():
            scores[cat] = _our_category_score(cat, group, entries)
        ours = summary(scores)
        theirs = {k: v for k, v in official[key].items() if k != "model"}
        diff = {k: (ours.get(k), v) for k, v in theirs.items() if ours.get(k) != v}
        out.append({"round": key[0], "language": key[1], "agree": not diff, "differences": diff})
    return out


def dataset_entries(cases: list[dict]) -> dict[tuple[str, str], Entry]:
    return {
        (e.language, e.id): e
        for c in {(c["language"], c["category"]) for c in cases}
        for e in load_category(*c)
    }


def compare(cases: list[dict], official: dict[str, dict], entries: dict[tuple[str, str], Entry]) -> dict:
    """Per-category counts and the full list of disagreements."""
    stats: dict[str, Counter] = defaultdict(Counter)
    by_label: dict[str, Counter] = defaultdict(Counter)
    disagreements, etype_mismatches, process_mismatches, known_gaps = [], [], [], []
    for c in cases:
        v = _our_verdict(c, entries)
        o = official[c["key"]]
        if c["label"] == "known_gap":  # documented differences: reported, not counted as disagreements
            known_gaps.append({"key": c["key"], "official": o, "ours": v.row(), "result": c["result"]})
            continue
        s = stats["synthetic" if c["label"] == "synthetic" else c["category"]]
        s["cases"] += 1
        by_label[c["label"]][o["valid"]] += 1
        if o["error_type"].startswith("official_"):
            s["official_crash"] += 1
        if v.valid != o["valid"]:
            disagreements.append({"key": c["key"], "official": o, "ours": v.row(), "result": c["result"]})
            continue
        s["agree"] += 1
        if not v.valid:
            s["both_invalid"] += 1
            if etype_agrees(v.error_type, o["error_type"]):
                s["etype_agree"] += 1
            else:
                etype_mismatches.append({"key": c["key"], "official": o["error_type"], "ours": v.error_type})
        if "process" in o:
            s["process_cases"] += 1
            if round(v.process or 0.0, 3) == o["process"]:
                s["process_agree"] += 1
            else:
                process_mismatches.append({"key": c["key"], "official": o["process"], "ours": v.process})
    return {
        "stats": stats,
        "by_label": by_label,
        "disagreements": disagreements,
        "etype_mismatches": etype_mismatches,
        "process_mismatches": process_mismatches,
        "known_gaps": known_gaps,
    }


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--official-python", default=str(DEFAULT_PYTHON))
    ap.add_argument("--languages", default=",".join(LANGUAGES))
    ap.add_argument("--categories", default=",".join(ALL_CATEGORIES))
    ap.add_argument("--limit", type=int, default=None, help="entries per category")
    ap.add_argument("--fuzz", type=int, default=0, help="also N character-level fuzz cases per category")
    ap.add_argument("--no-mutations", action="store_true", help="only the fuzz cases")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-synthetic", action="store_true", help="skip the synthetic schema/decoder entries")
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="whole result sets whose category accuracies are compared (round 0: ground truth)",
    )
    ap.add_argument("--out", default=None, help="write disagreements and mismatches as JSONL here")
    return ap


def _official_verdicts(
    python: str, cases: list[dict], entries: dict[tuple[str, str], Entry], synthetic: bool
) -> tuple[list[dict], list[dict]]:
    """(cases, official rows) for the dataset cases and, with ``synthetic``, the synthetic entries
    (whose cases and entries are added to ``cases`` and ``entries``)."""
    rows, _ = run_official(python, cases)
    if synthetic:
        with tempfile.TemporaryDirectory() as tmp:
            syn_cases, syn_entries = write_synthetic(Path(tmp))
            syn_rows, _ = run_official(python, syn_cases, data_root=Path(tmp))
        cases, rows = cases + syn_cases, rows + syn_rows
        entries.update(syn_entries)
    return cases, rows


def _official_summaries(python: str, rounds: list[dict], whole_dataset: bool) -> list[dict]:
    """Upstream's summary rows per round; none unless every category is there in full (the table
    needs everything) or when the official venv lacks openpyxl."""
    if not rounds or not whole_dataset:
        return []
    try:
        return run_official(python, rounds, mode="summary")[0]
    except subprocess.CalledProcessError:
        print("summary check skipped: it needs openpyxl in the official venv (see the runner's docstring)")
        return []


def _print_category_table(stats: dict[str, Counter]) -> None:
    print(
        f"{'category':<40}{'cases':>7}{'agree':>7}{'both invalid':>14}{'etype agree':>13}"
        f"{'process agree':>15}{'official crash':>16}"
    )
    for cat in sorted(stats):
        s = stats[cat]
        proc = f"{s['process_agree']}/{s['process_cases']}" if s["process_cases"] else "-"
        print(
            f"{cat:<40}{s['cases']:>7}{s['agree']:>7}{s['both_invalid']:>14}{s['etype_agree']:>13}"
            f"{proc:>15}{s['official_crash']:>16}"
        )
    tot = Counter()
    for s in stats.values():
        tot.update(s)
    print(
        f"verdict agreement: {tot['agree']}/{tot['cases']}; error_type agreement where both are invalid: "
        f"{tot['etype_agree']}/{tot['both_invalid']}; agent process accuracy agreement: "
        f"{tot['process_agree']}/{tot['process_cases']}; official crashes: {tot['official_crash']}"
    )


def _print_details(res: dict, cat_rows: list[dict], sum_rows: list[dict]) -> None:
    """Verdicts by label, known gaps, and every category, summary and case disagreement."""
    print("official verdicts by case label (valid True / False):")
    for label in sorted(res["by_label"]):
        print(f"  {label:<28} {res['by_label'][label][True]:>6} / {res['by_label'][label][False]:>6}")
    for d in res["known_gaps"]:
        print(
            f"KNOWN GAP {d['key'].split('|')[-1]}: official valid={d['official']['valid']}, "
            f"ours valid={d['ours']['valid']} ({d['ours']['error_type']})"
        )
    for r in cat_rows:
        if not r["agree"]:
            print("CATEGORY", json.dumps(r))
    for r in sum_rows:
        if not r["agree"]:
            print("SUMMARY", json.dumps(r))
    for kind in MISMATCH_KINDS:
        for d in res[kind]:
            print(LABELS[kind], json.dumps(d, ensure_ascii=False, default=str)[:700])


def _write_mismatches(path: str, res: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(
            json.dumps({"kind": kind, **d}, ensure_ascii=False, default=str) + "\n"
            for kind in MISMATCH_KINDS
            for d in res[kind]
        )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not Path(args.official_python).exists() or not (OFFICIAL_DIR / "eval_main.py").exists():
        print(
            f"SKIP: no official ACEBench evaluator at {OFFICIAL_DIR} (python {args.official_python}); "
            "see the docstring of benchmarks/acebench_official_runner.py for how to reconstruct it"
        )
        return 0
    cats = [c for c in args.categories.split(",") if c]
    for c in cats:
        family_of(c)
    langs = [x for x in args.languages.split(",") if x]
    t0 = time.time()
    cases = build_cases(langs, cats, args.limit, args.fuzz, args.seed, not args.no_mutations)
    t_build = time.time() - t0
    entries = dataset_entries(cases)
    t0 = time.time()
    cases, rows = _official_verdicts(args.official_python, cases, entries, not args.no_synthetic)
    crashed = {r["key"] for r in rows if r["error_type"].startswith("official_")}
    rounds = round_cases(cases, args.rounds, args.seed, crashed)
    round_rows, _ = run_official(args.official_python, rounds, mode="bench") if rounds else ([], {})
    whole = set(cats) == set(ALL_CATEGORIES) and args.limit is None
    summary_rows = _official_summaries(args.official_python, rounds, whole)
    t_official = time.time() - t0
    t0 = time.time()
    res = compare(cases, {r["key"]: r for r in rows}, entries)
    cat_rows = compare_categories(rounds, round_rows, entries)
    sum_rows = compare_summaries(rounds, summary_rows, entries) if summary_rows else []
    t_ours = time.time() - t0
    print(f"cases: {len(cases)} (built in {t_build:.1f} s; official {t_official:.1f} s; ours {t_ours:.1f} s)")
    _print_category_table(res["stats"])
    n_cat_agree = sum(r["agree"] for r in cat_rows)
    print(f"category accuracy agreement over {args.rounds} whole result sets: {n_cat_agree}/{len(cat_rows)}")
    n_sum_agree = sum(r["agree"] for r in sum_rows)
    if sum_rows:
        print(f"summary table agreement (all 26 columns of result.xlsx): {n_sum_agree}/{len(sum_rows)}")
    _print_details(res, cat_rows, sum_rows)
    if args.out:
        _write_mismatches(args.out, res)
    mismatched = any(res[kind] for kind in MISMATCH_KINDS)
    return 1 if mismatched or n_cat_agree < len(cat_rows) or n_sum_agree < len(sum_rows) else 0


if __name__ == "__main__":
    sys.exit(main())
