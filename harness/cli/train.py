"""``lopd train CONFIG.yaml key=value ...``: train a student with one of the learners.

    lopd train harness/configs/grpo.yaml run_dir=runs/grpo generations=320
    lopd prepare harness/configs/lopd.yaml && lopd train harness/configs/lopd.yaml   # LOPD: bank + composer first
    lopd train --example grpo env.id=lopd/micro-v0 optim.lr=1e-4
    lopd train --list-keys                      # every config key with its documentation
    lopd train harness/configs/paper/grpo_envscaler_qwen3_4b.yaml --dry-run model.num_hidden_layers=2

A run killed at any point continues from its newest checkpoint when started again with the same
``run_dir`` and settings; other settings are refused, naming the keys, unless ``--allow-config-change``
(:mod:`harness.training.run_record` says which keys may differ and how a change is recorded). A model
folder's ``lopd_defaults.json`` (the pinned base's: the micro world, 96 tokens, 8 turns) fills the keys
the config and overrides leave out. ``--dry-run`` builds the run on the CPU and takes one step
(:mod:`harness.training.dry_run`). Several processes: ``torchrun --nproc_per_node N -m harness.training.trainer CONFIG.yaml ...``.
"""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("train", help="train a student (grpo, opsd, sdpo, lopd, sft)")
    p.add_argument("config", nargs="?", help="YAML config file (see harness/configs/)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, e.g. optim.lr=1e-4")
    p.add_argument("--example", metavar="NAME", help="start from a packaged example config (grpo, opsd, sdpo, lopd, sft)")
    p.add_argument("--list-keys", action="store_true", help="print every config key with its documentation")
    p.add_argument("--allow-config-change", action="store_true",
                   help="continue a run_dir trained with other settings; the old config is kept as config.N.yaml "
                        "and the change logged in config_changes.jsonl (without it such a rerun is refused)")
    p.add_argument("--dry-run", action="store_true",
                   help="build everything the run builds (env, model, learner, optimizers; LOPD's bank and composer "
                        "as far as they can be offline), on the CPU with the in-process hf engine (no servers), in a "
                        "temporary run folder, then take ONE training step and print its wall time and peak RSS; "
                        "weights not on disk (e.g. Qwen/Qwen3-4B) become random ones at the model's shape "
                        "(model.num_hidden_layers=2 and model.random_shape={hidden_size: 64, ...} shrink it); exits 0")
    p.set_defaults(func=run)


def list_keys(cls: type, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted key, doc) for every field of a config dataclass, nested ones expanded."""
    import dataclasses
    import typing

    from harness.config import field_docs

    out = []
    hints = typing.get_type_hints(cls)
    docs: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        if dataclasses.is_dataclass(base):
            docs.update(field_docs(base))
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if f.metadata.get("sections"):  # one section per registered learner, under its name
            from harness.learners.base import LEARNERS, get_learner

            for name in LEARNERS:
                if get_learner(name).Config is not None:
                    out += list_keys(get_learner(name).Config, f"{prefix}{name}.")
        elif dataclasses.is_dataclass(tp):
            out += list_keys(tp, f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, docs.get(f.name, "").split("\n")[0]))
    return out


def run(args: argparse.Namespace) -> int:
    from harness.training.train_config import TrainConfig

    if args.list_keys:
        for key, doc in list_keys(TrainConfig):
            print(f"{key:42s} {doc}")
        return 0
    import shlex

    from harness.cli.prepare import check_prepared
    from harness.config import check_output, config_and_overrides
    from harness.training.run_record import check_rerun
    from harness.training.train_config import load_train_config
    from harness.training.trainer import example_config, main

    path, overrides = config_and_overrides(args.config, args.overrides)
    if args.example:
        if path:
            raise ValueError("give either a config file or --example, not both")
        path = str(example_config(args.example))
    if args.dry_run:
        from harness.training.dry_run import dry_run

        return dry_run(path, overrides)
    # fail fast, with the key named, before anything heavy; the line on the model folder's defaults comes first
    cfg = load_train_config(path, overrides, log=lambda s: print(s, file=sys.stderr))
    check_output(cfg.run_dir, "run_dir", folder=True)
    check_rerun(cfg, args.allow_config_change)
    check_prepared(cfg, shlex.join(["lopd", "prepare", *([path] if path else []), *overrides]))
    return main(([path] if path else []) + overrides + (["--allow-config-change"] if args.allow_config_change else []),
                announce=False)
