"""What the sandboxed ``lopd score`` commands (evalplus, livecodebench) share: the sandbox options and
the run of a benchmark's ``score_file`` (a sandbox that cannot start is a usage error, not a traceback)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def add_sandbox_options(p: argparse.ArgumentParser, mode_help: str) -> None:
    """``--mode``, ``--backend`` and ``--workers``."""
    p.add_argument("--mode", default="official", choices=["official", "strict"], help=mode_help)
    p.add_argument("--backend", default="local", choices=["local", "docker"], help="sandbox backend")
    from harness.config import PosInt, arg_type

    p.add_argument("--workers", type=arg_type(PosInt), default=2, help="samples graded at once (>= 1)")


def score_and_print(score_file: Callable[..., Any], format_summary: Callable[[Any], str],
                    args: argparse.Namespace, *inputs: Any, **options: Any) -> int:
    """Grade ``inputs`` with ``score_file`` in the sandbox the options name, and print the summary."""
    from envs.sandbox import SandboxConfig, SandboxUnavailable

    try:
        summary = score_file(*inputs, mode=args.mode, sandbox=SandboxConfig(backend=args.backend),
                             workers=args.workers, **options)
    except SandboxUnavailable as e:
        raise ValueError(str(e)) from None
    print(format_summary(summary))
    return 0
