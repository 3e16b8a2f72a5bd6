"""``lopd score evalplus``: grade an evalplus samples file exactly as evalplus 0.3.1 does.

lopd score evalplus --dataset humaneval --samples samples.jsonl [--mode official|strict] [--out FILE]
"""

from __future__ import annotations

import argparse


def register_score(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "evalplus",
        help="grade HumanEval+/MBPP+ samples ({task_id, solution|completion} JSONL)",
        description="Grade evalplus samples in the sandbox and print pass@1 (base, and base + extra tests).",
    )
    p.add_argument("--dataset", required=True, choices=["humaneval", "mbpp"])
    p.add_argument("--samples", required=True, help="JSONL of {task_id, solution} or {task_id, completion}")
    p.add_argument(
        "--mode",
        default="official",
        choices=["official", "strict"],
        help="official: evalplus 0.3.1's verdicts, quirks included (default); strict: also reject "
        "faked passes (see docs/SANDBOX.md)",
    )
    p.add_argument("--out", help="write one verdict line per sample, in input order")
    p.add_argument("--backend", default="local", choices=["local", "docker"], help="sandbox backend")
    p.add_argument("--workers", type=int, default=2, help="samples graded at once")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from envs.evalplus.scoring import format_summary, score_file
    from envs.sandbox import SandboxConfig, SandboxUnavailable

    try:
        summary = score_file(
            args.dataset,
            args.samples,
            mode=args.mode,
            out=args.out,
            sandbox=SandboxConfig(backend=args.backend),
            workers=max(1, args.workers),
        )
    except SandboxUnavailable as e:
        raise ValueError(str(e)) from None
    print(format_summary(summary))
    return 0
