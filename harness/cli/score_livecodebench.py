"""``lopd score livecodebench``: grade LiveCodeBench generations with lcb_runner's rules.

lopd score livecodebench --problems FILE --samples FILE [--out FILE]
"""

from __future__ import annotations

import argparse

from harness.cli.sandboxed_scoring import add_sandbox_options, score_and_print


def register_score(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "livecodebench",
        help="grade LiveCodeBench generations ({question_id, code_list})",
        description="Grade code_list entries against code_generation_lite problems and print pass@1. "
        "Scores on "
        "a file without private tests (e.g. the staged public-test file) are NOT LiveCodeBench results.",
    )
    p.add_argument(
        "--problems", required=True, help="code_generation_lite JSONL file, or a dir of test*.jsonl"
    )
    p.add_argument("--samples", required=True, help="JSON list / JSONL of {question_id, code_list}")
    p.add_argument(
        "--out", help="write one verdict line per sample (question_id, sample_index, pass, results)"
    )
    p.add_argument("--release", help="with a directory: release_v1..release_v6, release_latest or v1..v6")
    p.add_argument("--start-date", help="only problems with contest_date >= this (ISO date)")
    p.add_argument("--end-date", help="only problems with contest_date <= this (ISO date)")
    add_sandbox_options(p, "official: lcb_runner's verdicts (default); strict: also reject faked passes "
                           "(see docs/SANDBOX.md)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from envs.livecodebench.scoring import format_summary, score_file

    return score_and_print(score_file, format_summary, args, args.problems, args.samples, out=args.out,
                           release=args.release, start_date=args.start_date, end_date=args.end_date)
