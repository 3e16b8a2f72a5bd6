"""``lopd coldstart CONFIG.yaml --traces FILE ...``: warm the LOPD composer before RL.

Each pair is (the top-k bank experiences of a task -> a successful trajectory of the base model
on that task); the composer's latents replace the sentinel's placeholder run in the teacher's
prompt and the frozen base (adapter disabled) is trained to predict the trajectory's assistant
tokens (next-token NLL; only the LoRA and the QFormer learn). Settings come from the same
config as ``lopd train`` (``lopd.coldstart.*``, ``lopd.composer.*``, ``bank.*``)::

    lopd coldstart harness/configs/lopd.yaml --traces runs/base/traces.jsonl lopd.coldstart.steps=200
    lopd train harness/configs/lopd.yaml        # its lopd.composer_init is runs/lopd/composer_coldstart.pt
    lopd coldstart ... --checkpoint runs/cs.pt  # a killed run, started again, resumes from runs/cs.pt

The output file holds the composer's trainable weights, which are also the anchor c_phi0. The run
itself is :func:`harness.training.coldstart.run_coldstart`. On the micro world ``lopd prepare`` makes the
traces and the bank as well, then runs this.
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("coldstart", help="warm the LOPD composer on (experiences -> successful trajectory) pairs")
    p.add_argument("config", nargs="?", help="YAML config (the lopd train config)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides")
    p.add_argument("--traces", nargs="+", required=True, metavar="FILE",
                   help="trace JSONL files with successful base-model episodes (training split)")
    p.add_argument("--out", default=None, help="output file (default: RUN_DIR/composer_coldstart.pt)")
    p.add_argument("--checkpoint", default=None, metavar="FILE",
                   help="resume from this file when it exists, and save the state there (every "
                        "--checkpoint-every steps and at the end): a killed cold start goes on where it stopped")
    p.add_argument("--checkpoint-every", type=int, default=50, metavar="N", help="steps between checkpoints")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.training.coldstart import run_coldstart
    from harness.config import check_input_files, check_output, config_and_overrides
    from harness.training.train_config import load_train_config

    path, overrides = config_and_overrides(args.config, args.overrides)
    # `--traces a.jsonl lopd.coldstart.steps=200`: nargs="+" takes the override too; a KEY=VALUE that
    # names no file is one (the rule config_and_overrides applies to CONFIG)
    given = [(t, "=" in t and not Path(t).exists()) for t in args.traces]
    traces, overrides = [t for t, ov in given if not ov], overrides + [t for t, ov in given if ov]
    if not traces:
        raise ValueError("--traces names no file")
    check_input_files(traces, "--traces")
    for flag, value in (("--out", args.out), ("--checkpoint", args.checkpoint)):
        if value:
            check_output(value, flag, folder=False)
    if args.checkpoint_every < 0:
        raise ValueError(f"--checkpoint-every must be >= 0, got {args.checkpoint_every}")
    out = run_coldstart(load_train_config(path, overrides), traces, args.out,  # as lopd train resolves it
                        args.checkpoint, args.checkpoint_every)
    print(f"wrote {out}; train with lopd.composer_init={out}")
    return 0
