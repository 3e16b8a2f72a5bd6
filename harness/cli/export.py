"""``lopd export RUN --out DIR``: the trained student as a plain HF model directory.

Only the student leaves: no experience bank, composer, teacher or optimiser state. The result
loads with ``transformers.AutoModelForCausalLM.from_pretrained(DIR)`` and its tokenizer with
``AutoTokenizer.from_pretrained(DIR)``::

    lopd export runs/lopd --out models/lopd-student            # newest checkpoint
    lopd export runs/lopd/checkpoints/step_000020 --out models/step20
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("export", help="write a run's student as a plain HF model directory")
    p.add_argument("run", help="run directory (its newest checkpoint) or a checkpoint directory")
    p.add_argument("--out", required=True, help="directory to write")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out")
    p.set_defaults(func=run)


def export_student(run: str, out: str, *, force: bool = False) -> str:
    """Copy the student of ``run``'s newest checkpoint (or of checkpoint ``run``) into ``out``."""
    from pathlib import Path

    from harness.training.checkpoint import latest_checkpoint
    from harness.models import load_model, save_pretrained

    ck = latest_checkpoint(run)
    if ck is None or not (ck / "student" / "config.json").is_file():
        raise FileNotFoundError(f"{run} holds no checkpoint with a student (expected {run}/checkpoints/step_*/student)")
    dest = Path(out)
    if dest.exists() and any(dest.iterdir()) and not force:
        raise ValueError(f"{dest} is not empty; pass --force to write into it")
    model, tok = load_model(ck / "student")  # through from_pretrained: what is written reloads the same way
    save_pretrained(model, tok, dest)
    return str(ck)


def run(args: argparse.Namespace) -> int:
    src = export_student(args.run, args.out, force=args.force)
    print(f"exported the student of {src} to {args.out}")
    return 0
