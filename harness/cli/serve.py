"""``lopd serve ENV_ID [--host H] [--port P] [--max-sessions N] [KEY=VALUE ...]``: a registered env as an
OpenEnv server (envs/serving/openenv_server.py), one env instance per client session::

    lopd serve lopd/shop-v0                                  # http://127.0.0.1:8000
    lopd serve lopd/micro-v0 --port 8001 max_steps=5 split=eval
    lopd serve lopd/shop-v0 --host 0.0.0.0 --max-sessions 64 # reachable from other machines

Clients: OpenEnv's ``GenericEnvClient(base_url="http://127.0.0.1:8000").sync()``, TRL through
envs/integrations/trl.py, and our own trainer and evaluator with ``env.url=http://127.0.0.1:8000``
(``lopd/remote-v0``). KEY=VALUE words are the env's keyword arguments (values read as YAML), as for
``lopd serve-mcp``. An unknown env or keyword is an error (exit 2) before anything is served.

OpenEnv's server package needs an MCP SDK older than this project's, so the server runs in
``.venv-openenv`` (built by ``make openenv``, or here on first use); this command re-runs itself there.
"""

from __future__ import annotations

import argparse
import os
import sys

PROJECT_PYTHON = "LOPD_PROJECT_PYTHON"  # the interpreter `lopd serve` was started with, for the overlay


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("serve", help="serve an env over HTTP/WebSocket as an OpenEnv server",
                              description="Serve a registered env as an OpenEnv server (one env per session).")
    p.add_argument("env", metavar="ENV_ID", help="a registered env id, e.g. lopd/shop-v0 (or MODULE:ID)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--max-sessions", type=int, default=16, metavar="N",
                   help="most concurrent client sessions; one more is refused (default 16)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="env keyword arguments, values read as YAML")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harness.cli.serve_mcp import parse_env_kwargs

    kwargs = parse_env_kwargs(args.overrides)
    if args.max_sessions < 1:
        raise ValueError(f"--max-sessions must be at least 1, got {args.max_sessions}")
    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be in 1..65535, got {args.port}")
    try:
        import openenv.core.env_server  # noqa: F401
    except ImportError:
        return _rerun_in_overlay(args)
    # What the env starts (an MCP server, a sandboxed program) runs under the project's interpreter, as
    # it does in-process, not under the overlay's (whose mcp 1.x comes first).
    sys.executable = os.environ.pop(PROJECT_PYTHON, sys.executable)
    from envs.registry import resolve_env_id
    from envs.serving.openenv_server import serve

    serve(resolve_env_id(args.env), kwargs, host=args.host, port=args.port, max_sessions=args.max_sessions)
    return 0


def _rerun_in_overlay(args: argparse.Namespace) -> int:
    from envs.serving.venv import OpenEnvVenvError, ensure_openenv_venv, openenv_python

    if os.path.realpath(sys.prefix) == os.path.realpath(openenv_python().parents[1]):
        raise ValueError("openenv is not importable in .venv-openenv; rebuild it with `make openenv`")
    try:
        python = ensure_openenv_venv()
    except OpenEnvVenvError as e:
        raise ValueError(f"{e}\n(lopd serve needs .venv-openenv: run `make openenv` where PyPI is reachable)") from None
    argv = [str(python), "-m", "harness.cli", "serve", args.env, "--host", args.host, "--port", str(args.port),
            "--max-sessions", str(args.max_sessions), *args.overrides]
    sys.stdout.flush()
    sys.stderr.flush()
    os.environ[PROJECT_PYTHON] = sys.executable
    os.execv(argv[0], argv)  # the same process: a signal to it reaches the server
    return 1  # not reached
