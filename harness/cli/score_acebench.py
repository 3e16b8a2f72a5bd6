"""``lopd score acebench``: score ACEBench result files you already have, with the official rules.

ACEBench's layout: one file per category, ``data_<category>_result.json``, JSON lines of
``{"id": ..., "result": ...}``. ``result`` is the raw model text for normal and special entries,
and for agent entries the list of saved class states, with the executed call messages under
``"process"``. Example::

    lopd score acebench --results result_all/result_en/my-model --language en --out verdicts.jsonl

Prints the per-category accuracies and ACEBench's summary table. ``--out`` writes one line per
entry: ``{id, category, valid, error_type, error}``. A missing or malformed line fails its entry
(``missing_result`` / ``wrong_output_format``); a missing category file scores 0 in the summary,
as in ACEBench's own table, and is named in the output.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register_score(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "acebench",
        help="score ACEBench data_<category>_result.json files",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--results", required=True, type=Path, help="folder holding data_<category>_result.json files"
    )
    p.add_argument(
        "--language", default="en", choices=["en", "zh"], help="which half of ACEBench (default en)"
    )
    p.add_argument("--out", type=Path, default=None, help="write per-entry verdicts as JSONL here")
    p.add_argument(
        "--fc",
        action="store_true",
        help="read list-valued normal results as FC calls [{name: json-args}] (upstream's evaluator "
        "rejects them as wrong_output_format)",
    )
    p.set_defaults(func=run)


def read_results(path: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Rows by id from one result file, and the problems met (bad lines, duplicate ids)."""
    from envs.data import json_lines

    rows: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for n, row, error in json_lines(path):
        if error is not None:
            problems.append(f"{path.name}:{n}: not valid JSON ({str(error)[:80]})")
        elif not isinstance(row, dict) or "id" not in row:
            problems.append(f"{path.name}:{n}: not an object with an 'id'")
        elif str(row["id"]) in rows:
            problems.append(f"{path.name}:{n}: duplicate id {row['id']} (the first line is used)")
        else:
            rows[str(row["id"])] = row
    return rows, problems


def score_directory(results: Path, language: str, fc: bool = False):
    """(category scores, verdicts in data order, missing categories, problems) for one result folder."""
    from envs.acebench.data import ALL_CATEGORIES, load_category
    from envs.acebench.scoring import category_score, verdict

    scores, verdicts, missing, problems = {}, [], [], []
    for category in ALL_CATEGORIES:
        path = results / f"data_{category}_result.json"
        if not path.is_file():
            missing.append(category)
            continue
        try:
            rows, bad = read_results(path)
        except OSError as e:  # unreadable file: report it and score the category as missing
            problems.append(f"{path.name}: cannot be read ({e})")
            missing.append(category)
            continue
        problems += bad
        entries = load_category(language, category)
        known = {e.id for e in entries}
        problems += [
            f"{path.name}: id {i} is not an ACEBench {category} entry (ignored)"
            for i in rows
            if i not in known
        ]
        cat_verdicts = [verdict(e, rows.get(e.id), fc=fc) for e in entries]
        scores[category] = category_score(category, cat_verdicts, [e.id for e in entries])
        verdicts += cat_verdicts
    return scores, verdicts, missing, problems


def format_table(scores: dict, missing: list[str]) -> str:
    from envs.acebench.scoring import format_summary, summary

    lines = [f"{'category':45s} {'accuracy':>9s} {'process':>8s} {'correct':>8s}"]
    for cat, s in scores.items():
        proc = f"{s.process_accuracy:.3f}" if s.process_accuracy is not None else ""
        lines.append(f"{cat:45s} {s.accuracy:9.3f} {proc:>8s} {s.correct:>4d}/{s.total:<4d}")
    for cat in missing:
        lines.append(f"{cat:45s} {'missing':>9s}")
    lines.append("")
    lines.append("summary (ACEBench table)")
    lines += ["  " + line for line in format_summary(summary(scores), list(scores)).splitlines()]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from envs.data import DataNotFoundError

    if not args.results.is_dir():
        print(f"lopd score acebench: error: --results {args.results} is not a folder", file=sys.stderr)
        return 2
    try:
        scores, verdicts, missing, problems = score_directory(args.results, args.language, args.fc)
    except DataNotFoundError as e:
        print(f"lopd score acebench: error: {e}", file=sys.stderr)
        return 2
    if not scores:
        print(
            f"lopd score acebench: error: no data_<category>_result.json files in {args.results}",
            file=sys.stderr,
        )
        return 2
    for p in problems:
        print(f"warning: {p}", file=sys.stderr)
    print(format_table(scores, missing))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w", encoding="utf-8") as f:
            for v in verdicts:
                row = {
                    "id": v.id,
                    "category": v.category,
                    "valid": v.valid,
                    "error_type": v.error_type,
                    "error": v.error,
                }
                f.write(json.dumps(row, ensure_ascii=False, default=repr) + "\n")
        print(f"wrote {len(verdicts)} verdicts to {args.out}")
    return 0
