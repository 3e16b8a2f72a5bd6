"""The tools of one episode of any registered env, served over MCP (``lopd serve-mcp``), so an MCP client
(an agent app, or the ``mcp`` SDK's own client) can call our envs' tools::

    env = envs.registry.make("lopd/shop-v0")
    server = build_server(env, task_id="apples")    # resets the env; an mcp.server.lowlevel.Server
    serve_stdio("lopd/shop-v0", task_id="apples")   # makes, resets, serves over stdio, closes the env

The server is the official SDK's low-level :class:`mcp.server.lowlevel.Server`, which takes a tool's JSON
schema as is: ``tools/list`` lists the episode's tools (name, description, and the OpenAI schema's
``parameters`` as ``inputSchema``); ``tools/call`` runs ``env.tools.call(name, arguments)`` and answers its
content as one text block, ``isError`` set when the call failed (an unknown tool, bad arguments and a tool
that raised are such results, never protocol errors or crashes). The task's prompt is in the server's
``instructions`` and is the prompt ``task`` (``prompts/get``).

The calls go straight to the episode's tools: no ``step``, so no turn limit and no reward. Calls run one at
a time on the event loop's thread (the thread that reset the env), as they would in process.
"""

from __future__ import annotations

import contextlib
import copy
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

PROMPT_NAME = "task"
"""The MCP prompt holding the task's prompt."""


def _log(text: str) -> None:
    print(f"lopd serve-mcp: {text}", file=sys.stderr, flush=True)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lopd-gym")
    except PackageNotFoundError:
        return ""


def input_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI tool schema's ``parameters`` as an MCP ``inputSchema`` (a copy): MCP wants an object
    schema at the root, so a schema without ``type: object`` gets it (and ``{}`` when there is none)."""
    params = schema.get("function", schema).get("parameters")
    params = copy.deepcopy(params) if isinstance(params, dict) else {}
    if params.get("type") != "object":
        params["type"] = "object"
    return params


def mcp_tools(schemas: list[dict[str, Any]]) -> list[Any]:
    """OpenAI function schemas -> MCP :class:`mcp_types.Tool` objects."""
    import mcp_types as types

    out = []
    for s in schemas:
        fn = s.get("function", s)
        out.append(types.Tool(name=str(fn["name"]), description=fn.get("description") or None,
                              input_schema=input_schema(s)))
    return out


def call_result(tools: Any, name: str, arguments: dict[str, Any] | None) -> Any:
    """``tools.call(name, arguments)`` as an MCP :class:`mcp_types.CallToolResult`: the content as one text
    block, ``is_error`` when the call failed. Never raises (a tool set that does is an error result too)."""
    import mcp_types as types

    try:
        result = tools.call(name, arguments)
        text, failed = str(result.content), result.error is not None
    except Exception as e:  # noqa: BLE001 - ToolSet.call never raises; a tool set of someone else's might
        text, failed = f"Error: calling {name} raised {type(e).__name__}: {e}"[:2000], True
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=failed)


def _instructions(env_id: str, task: Any) -> str:
    head = (f"The tools of one episode of the LOPD Gym env {env_id} (task {task.task_id!r}). "
            "Use them to do this task:")
    return f"{head}\n\n{_task_text(task)}"


def _task_text(task: Any) -> str:
    return f"{task.system}\n\n{task.prompt}" if getattr(task, "system", None) else task.prompt


def _check_task_id(env: Any, env_id: str, task_id: str) -> None:
    """An unknown ``task_id`` is a KeyError naming some of the env's tasks (when the env can list them)."""
    all_tasks = getattr(env, "all_tasks", None)
    if not callable(all_tasks):
        return
    ids = [t.task_id for t in all_tasks()]
    if task_id in ids:
        return
    shown = ", ".join(ids[:10]) + (f", ... ({len(ids)} in all)" if len(ids) > 10 else "")
    raise KeyError(f"{env_id} has no task {task_id!r}; its tasks: {shown or 'none'}")


def build_server(env: Any, *, task_id: str | None = None, seed: int | None = 0, env_id: str | None = None) -> Any:
    """Reset ``env`` (the task ``task_id``, any split; else a draw from its split seeded with ``seed``) and
    return an :class:`mcp.server.lowlevel.Server` serving that episode's tools (see the module docstring).

    ``env`` is what ``gymnasium.make`` returns (or a bare ToolEnv); ``env_id`` names it in the server's
    identity and instructions (default: its spec's id). An unknown ``task_id`` is a KeyError."""
    base = env.unwrapped
    env_id = env_id or getattr(getattr(env, "spec", None), "id", None) or type(base).__name__
    if task_id is not None:
        _check_task_id(base, env_id, str(task_id))
    env.reset(seed=seed, options={"task_id": str(task_id)} if task_id is not None else None)
    task = base.task

    import mcp_types as types  # after the reset: a mistake is reported without loading the SDK
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=mcp_tools(base.tools.schemas))

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        # synchronous, on the loop's thread: one call at a time, on the thread that reset the env
        return call_result(base.tools, params.name, params.arguments)

    prompt = types.Prompt(name=PROMPT_NAME, title=f"Task {task.task_id}",
                          description=f"The task of this episode of {env_id} ({task.task_id!r}, split {task.split!r})")

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[prompt])

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult | types.ErrorData:
        if params.name != PROMPT_NAME:
            return types.ErrorData(code=types.INVALID_PARAMS,
                                   message=f"unknown prompt {params.name!r}; this server has: {PROMPT_NAME}")
        message = types.PromptMessage(role="user", content=types.TextContent(text=_task_text(task)))
        return types.GetPromptResult(description=prompt.description, messages=[message])

    return Server(
        env_id, version=_version(), title=f"LOPD Gym {env_id}, task {task.task_id}",
        description=f"The tools of one episode of the LOPD Gym env {env_id}",
        instructions=_instructions(env_id, task),
        on_list_tools=list_tools, on_call_tool=call_tool, on_list_prompts=list_prompts, on_get_prompt=get_prompt,
    )


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send what is written to stdout (``print`` and the file descriptor, so a child's or a C library's
    output too) to stderr for the block: before and after serving, stdout is the protocol's alone."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no fd 1 (or 2): only Python's own writes are redirected
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is so that the env is closed on the way out (as on Ctrl-C)."""


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise _Terminated(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def make_env(env_id: str, *, split: str | None = None, env_kwargs: dict[str, Any] | None = None) -> Any:
    """``envs.registry.make`` with the user's words: an unknown id is a KeyError listing the registered
    ones, a keyword the env does not take or a value it refuses a ValueError."""
    from envs.registry import make, resolve_env_id

    kwargs = dict(env_kwargs or {})
    if split is not None:
        if kwargs.get("split", split) != split:
            raise ValueError(f"--split {split} and split={kwargs['split']} disagree; give one")
        kwargs["split"] = split
    resolved = resolve_env_id(env_id)
    try:
        return make(resolved, **kwargs)
    except TypeError as e:  # e.g. max_steps=many: the constructor's TypeError is about the user's value
        if not kwargs:
            raise
        reason = str(e).split(" was raised from the environment creator")[0]  # gymnasium's suffix repeats us
        raise ValueError(f"{resolved} refuses its keyword arguments {kwargs}: {reason}") from None


def serve_stdio(env_id: str, *, task_id: str | None = None, seed: int | None = None, split: str | None = None,
                env_kwargs: dict[str, Any] | None = None) -> int:
    """Make ``env_id`` (with ``split`` and ``env_kwargs``), reset it (``task_id``, else a draw seeded with
    ``seed``, default 0) and serve its tools over this process's stdin/stdout until the client disconnects
    (closes stdin); then close the env and return 0. SIGTERM closes the env too and returns 143; Ctrl-C
    closes it and raises KeyboardInterrupt. Every mistake (an unknown env, task or keyword, a task with no
    tools) raises before anything is served. Logs go to stderr; stdout carries protocol messages only."""
    with stdout_to_stderr():  # what importing and making an env prints cannot reach the client
        env = make_env(env_id, split=split, env_kwargs=env_kwargs)
        try:
            server = build_server(env, task_id=task_id, seed=0 if seed is None else seed)
            base = env.unwrapped
            if not base.tools.schemas:
                raise ValueError(f"{server.name} task {base.task.task_id!r} has no callable tools (env.tools is "
                                 "empty: the env scores responses rather than running calls); nothing to serve")
        except BaseException:
            env.close()
            raise
    task, names = base.task, [s.get("function", s)["name"] for s in base.tools.schemas]
    _log(f"serving {server.name} task {task.task_id!r} (split {task.split!r}; tools: {', '.join(names)}) "
         f"over stdio, pid {os.getpid()}")

    import anyio
    from mcp.server.stdio import stdio_server

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):  # fd 1 points at stderr while it serves
            await server.run(read_stream, write_stream, server.create_initialization_options())

    ended = "stopped by an error"
    try:
        with _sigterm_as_interrupt():
            anyio.run(run)
        ended = "client disconnected"
        return 0
    except _Terminated:
        ended = "terminated (SIGTERM)"
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        ended = "interrupted"
        raise
    finally:
        with stdout_to_stderr():
            env.close()
        _log(f"{ended}; env closed")
