"""``lopd export RUN --out DIR``: the trained student as a plain HF model directory.

Only the student leaves: no experience bank, composer, teacher or optimiser state; the run's env and
turn limits go with it as ``lopd_defaults.json`` (:mod:`harness.models.defaults`). The result
loads with ``transformers.AutoModelForCausalLM.from_pretrained(DIR)`` and its tokenizer with
``AutoTokenizer.from_pretrained(DIR)``::

    lopd export runs/lopd --out models/lopd-student            # newest checkpoint
    lopd export runs/lopd/checkpoints/step_000020 --out models/step20
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("export", help="write a run's student as a plain HF model directory")
    p.add_argument("run", help="run directory (its newest checkpoint) or a checkpoint directory")
    p.add_argument("--out", required=True, help="directory to write")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out")
    p.set_defaults(func=run)


def export_student(run: str, out: str, *, force: bool = False) -> str:
    """Copy the student of ``run``'s newest checkpoint (or of checkpoint ``run``) into ``out``."""
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
    _write_run_defaults(ck.parent.parent / "config.yaml", dest)
    return str(ck)


def _write_run_defaults(config: Path, dest: Path) -> None:
    """The run's env and turn limits as the folder's lopd_defaults.json, so ``lopd eval`` plays it as trained."""
    from harness.config import load_config
    from harness.models.defaults import ModelDefaults, ModelEnv, write_model_defaults
    from harness.training.train_config import TrainConfig

    if not config.is_file():
        return
    cfg = load_config(TrainConfig, config)
    env_id = cfg.env.id.rpartition(":")[2]  # mypkg:lopd/x-v0 -> the id eval reports
    write_model_defaults(dest, ModelDefaults(ModelEnv(env_id, dict(cfg.env.kwargs)), cfg.sampling.max_new_tokens,
                                             cfg.rollout.max_turns, cfg.rollout.max_context_tokens))


def run(args: argparse.Namespace) -> int:
    src = export_student(args.run, args.out, force=args.force)
    print(f"exported the student of {src} to {args.out}")
    return 0
