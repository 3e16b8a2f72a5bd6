"""The ``lopd`` command line. Each module in this package adds one subcommand.

A module defines ``register(subparsers)``, which adds its parser and sets ``func`` (called with the
parsed args; its int return is the exit code). Modules are discovered, so a new subcommand is a new
file here and nothing else.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lopd", description="LOPD Gym: environments and self-distillation training.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if mod.name.startswith("_"):  # __main__ runs the CLI; it is no command
            continue
        module = importlib.import_module(f"{__name__}.{mod.name}")
        if hasattr(module, "register"):
            module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (FileNotFoundError, ValueError, KeyError) as e:  # user-facing errors: no traceback
        print(f"lopd {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
