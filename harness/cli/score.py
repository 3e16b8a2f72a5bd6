"""``lopd score BENCH ...``: score result files you already have with the official rules.

Each benchmark adds itself through a module ``harness/cli/score_<bench>.py`` that defines
``register_score(subparsers)`` (adding e.g. ``bfcl-v3`` with its own options and ``func``).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil

import harness.cli as cli_pkg


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("score", help="score existing benchmark result files offline")
    benches = parser.add_subparsers(dest="bench", metavar="BENCH")
    for mod in sorted(pkgutil.iter_modules(cli_pkg.__path__), key=lambda m: m.name):
        if mod.name.startswith("score_"):
            importlib.import_module(f"harness.cli.{mod.name}").register_score(benches)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
