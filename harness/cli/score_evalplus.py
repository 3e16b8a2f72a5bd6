"""``lopd score evalplus``: grade an evalplus samples file exactly as evalplus 0.3.1 does.

lopd score evalplus --dataset humaneval --samples samples.jsonl [--mode official|strict] [--out FILE]
"""

from __future__ import annotations

import argparse

from harness.cli.sandboxed_scoring import add_sandbox_options, score_and_print


def register_score(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "evalplus",
        help="grade HumanEval+/MBPP+ samples ({task_id, solution|completion} JSONL)",
        description="Grade evalplus samples in the sandbox and print pass@1 (base, and base + extra tests).",
    )
    p.add_argument("--dataset", required=True, choices=["humaneval", "mbpp"])
    p.add_argument("--samples", required=True, help="JSONL of {task_id, solution} or {task_id, completion}")
    p.add_argument("--out", help="write one verdict line per sample, in input order")
    add_sandbox_options(p, "official: evalplus 0.3.1's verdicts, quirks included (default); strict: also reject "
                           "faked passes (see docs/SANDBOX.md)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from envs.evalplus.scoring import format_summary, score_file

    return score_and_print(score_file, format_summary, args, args.dataset, args.samples, out=args.out)
