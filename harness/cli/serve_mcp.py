"""``lopd serve-mcp ENV_ID [--task-id ID | --seed N] [--split S] [KEY=VALUE ...]``: the tools of one episode
of a registered env, served over MCP on stdin/stdout (envs/mcp/serve.py), for an MCP client to call::

    lopd serve-mcp lopd/shop-v0 --task-id apples          # that task (any split)
    lopd serve-mcp shop-v0 --seed 3 --split eval          # a task drawn from the eval split with seed 3
    lopd serve-mcp lopd/micro-v0 max_steps=5              # KEY=VALUE: env keyword arguments (YAML values)
    lopd serve-mcp mypkg:lopd/todo-v0 --task-id t1        # an env of your own package (imports mypkg)

Without ``--task-id`` or ``--seed`` the task is drawn with seed 0. The client starts the command and talks
to it over its stdin/stdout; closing stdin ends the server, which closes the env. Logs go to stderr. A
Claude Desktop entry (``claude_desktop_config.json``; any client that starts stdio servers takes the same
command and args)::

    {"mcpServers": {"lopd-shop": {
        "command": "/path/to/lopd-gym/.venv/bin/lopd",
        "args": ["serve-mcp", "lopd/shop-v0", "--task-id", "apples"]}}}

and from Python, with the official SDK's client::

    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command="lopd", args=["serve-mcp", "lopd/shop-v0", "--task-id", "apples"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()            # init.instructions: the task's prompt
        tools = (await session.list_tools()).tools
        result = await session.call_tool("price", {"item": "apple"})   # result.content[0].text == "2"

The server's instructions and its prompt ``task`` carry the task's prompt. Calls go to the episode's tools
directly: there is no turn limit and no reward. An unknown env, task or keyword is an error (exit 2) before
anything is served.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("serve-mcp", help="serve the tools of one episode of an env over MCP (stdio)",
                              description="Serve the tools of one episode of a registered env over MCP on "
                                          "stdin/stdout, until the client disconnects.")
    p.add_argument("env", metavar="ENV_ID", help="a registered env id, e.g. lopd/shop-v0 (or MODULE:ID)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--task-id", metavar="ID", help="the task to play (any split)")
    which.add_argument("--seed", type=int, metavar="N", help="draw the task from the split with this seed (default 0)")
    p.add_argument("--split", metavar="S", help="the env's split, e.g. train or eval (the draw's pool)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="env keyword arguments, values read as YAML: max_steps=5, 'categories=[a, b]', "
                        "server_env.HOME=/tmp (a dotted key sets an item of a mapping)")
    p.set_defaults(func=run)


def parse_env_kwargs(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` words -> env keyword arguments (values as YAML; ``a.b=1`` is ``{"a": {"b": 1}}``)."""
    from harness.config import parse_override

    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"{item!r} is no KEY=VALUE env keyword argument (e.g. max_steps=5)")
        keys, value = parse_override(item)  # a ConfigError (a user error) for an empty key
        node = out
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ValueError(f"env keyword argument {item!r}: {k} is already set to a value, not a mapping")
        node[keys[-1]] = value
    return out


def run(args: argparse.Namespace) -> int:
    kwargs = parse_env_kwargs(args.overrides)  # before the SDK loads: a typo costs nothing
    from envs.mcp.serve import serve_stdio

    return serve_stdio(args.env, task_id=args.task_id, seed=args.seed, split=args.split, env_kwargs=kwargs)
