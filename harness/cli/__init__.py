"""The ``lopd`` command line. Each module in this package adds one subcommand.

A module defines ``register(subparsers)``, which adds its parser and sets ``func`` (called with the
parsed args; its int return is the exit code). Modules are discovered, so a new subcommand is a new
file here and nothing else.
"""

from __future__ import annotations

import argparse
import importlib
import os
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


def _user_errors() -> tuple[type[BaseException], ...]:
    """What an ordinary mistake raises: a bad config, flag, file or folder (printed as ``lopd CMD: error:
    ...``, exit 2). Anything else is a bug and keeps its traceback."""
    from harness.config import ConfigError, PathError

    return (ConfigError, PathError, ValueError, KeyError, FileNotFoundError, FileExistsError,
            IsADirectoryError, NotADirectoryError, PermissionError)


def _message(e: BaseException) -> str:
    return str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)  # a KeyError's str() is its repr


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse ``argv``; KEY=VALUE words after a flag (``lopd prepare CONFIG --bank-tasks 50 generations=64``)
    join the command's overrides, as if intermixed (argparse stops the positionals at the first flag)."""
    args, extra = parser.parse_known_args(argv)
    if extra and isinstance(getattr(args, "overrides", None), list) \
            and all("=" in x and not x.startswith("-") for x in extra):
        args.overrides += extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (its fd polls as an error)."""
    import select

    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poll.poll(0))
    except (OSError, ValueError, AttributeError):  # no real stdout (captured)
        return False


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        if not _stdout_closed():  # a socket's broken pipe (a server): not the reader of our output leaving
            raise
        # `lopd train --list-keys | head -1`: as Python's docs advise (signal, "Note on SIGPIPE"), point
        # stdout at devnull so the flush at exit cannot fail again, and exit as a SIGPIPE'd process does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = _parse(parser, argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except _user_errors() as e:  # user-facing errors: no traceback
        print(f"lopd {args.command}: error: {_message(e)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
