"""``lopd score livecodebench``: grade LiveCodeBench generations with lcb_runner's rules.

lopd score livecodebench --problems FILE --samples FILE [--out FILE]
"""

from __future__ import annotations

import argparse


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
    p.add_argument("--mode", default="official", choices=["official", "strict"])
    p.add_argument("--backend", default="local", choices=["local", "docker"], help="sandbox backend")
    p.add_argument("--workers", type=int, default=2)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from envs.livecodebench.scoring import format_summary, score_file
    from envs.sandbox import SandboxConfig, SandboxUnavailable

    try:
        summary = score_file(
            args.problems,
            args.samples,
            out=args.out,
            mode=args.mode,
            sandbox=SandboxConfig(backend=args.backend),
            workers=max(1, args.workers),
            release=args.release,
            start_date=args.start_date,
            end_date=args.end_date,
        )
    except SandboxUnavailable as e:
        raise ValueError(str(e)) from None
    print(format_summary(summary))
    return 0
