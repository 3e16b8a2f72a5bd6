"""A blocking MCP client session over the official ``mcp`` SDK, for a Gymnasium env's synchronous API.

The SDK is async; every session of the process runs on one background event-loop thread, and the
blocking methods submit coroutines to it with a timeout, so a hung server costs a call its timeout and
never hangs the env::

    session = McpSession(command=["python", "server.py"], call_timeout=10)
    tools = session.start()                     # list of mcp Tool objects; raises McpStartError
    outcome = session.call("add_note", {"text": "milk"})
    outcome.text, outcome.error                 # "saved note 1", None
    session.close()                             # no server process is left after this

Failures of a call are outcomes (``error`` set), never exceptions: an error result, a timeout, a server
that died or never answered.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import shlex
import sys
import tempfile
import threading
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GUARD = str(Path(__file__).with_name("guard.py"))
STDERR_TAIL = 2000
"""Characters of the server's stderr quoted when it fails to start."""
_CLOSE_GRACE = 10.0
"""Seconds ``close`` waits for the SDK's shutdown (stdin close, 2 s grace, SIGTERM, 2 s, SIGKILL)."""


class _QuietGarbage(logging.Filter):
    """Drops the SDK's traceback for a stdout line that is not JSON-RPC (a server's stray print): the
    session counts such lines (``McpSession.garbage_lines``) and goes on, as the SDK does."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Failed to parse JSONRPC message")


logging.getLogger("mcp.client.stdio").addFilter(_QuietGarbage())


class McpStartError(RuntimeError):
    """The server could not be started or did not complete the MCP handshake."""


@dataclass(frozen=True)
class CallOutcome:
    """What one tool call gave: ``text`` for the model; ``error`` None on success, else one of
    ``tool_error`` (the server's error result), ``timeout``, ``server_error`` (no answer: the
    connection broke, the server died); ``structured`` is the result's structured content, if any."""

    text: str
    error: str | None = None
    structured: Any = None


class _Loop:
    """The process's MCP event loop thread (a new one after fork: threads do not survive it)."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None
    _pid: int | None = None

    @classmethod
    def get(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None or cls._pid != os.getpid():
                loop = asyncio.new_event_loop()
                # daemon: a forgotten session must not keep the interpreter alive; the thread lives as
                # long as the process, which the servers' death signal (guard.py) relies on
                threading.Thread(target=loop.run_forever, name="lopd-mcp-loop", daemon=True).start()
                cls._loop, cls._pid = loop, os.getpid()
            return cls._loop


def sdk_field(obj: Any, name: str) -> Any:
    """``obj.name`` on the 2.x SDK's models, ``obj.nameInCamelCase`` on 1.x's (``lopd serve`` runs this
    client under 1.x, the MCP SDK OpenEnv's server needs)."""
    if hasattr(obj, name):
        return getattr(obj, name)
    head, *rest = name.split("_")
    return getattr(obj, head + "".join(w.title() for w in rest), None)


def result_text(result: Any) -> str:
    """An MCP ``CallToolResult``'s content as one string (text blocks joined; other blocks named)."""
    parts = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and hasattr(block.resource, "text"):
            parts.append(block.resource.text)
        else:
            parts.append(f"[{kind or type(block).__name__} content: {sdk_field(block, 'mime_type') or ''}]")
    if not parts and sdk_field(result, "structured_content") is not None:
        parts.append(json.dumps(sdk_field(result, "structured_content"), ensure_ascii=False, default=str))
    return "\n".join(parts)


class McpSession:
    """One connection to one MCP server: a stdio ``command`` (started here) or a streamable-HTTP ``url``."""

    def __init__(self, *, command: list[str] | None = None, url: str | None = None,
                 env: dict[str, str] | None = None, cwd: str | None = None,
                 start_timeout: float = 30.0, call_timeout: float = 30.0):
        if (command is None) == (url is None):
            raise ValueError("give exactly one of command= (a stdio server) and url= (streamable HTTP)")
        if command is not None and (not command or not all(isinstance(a, str) for a in command)):
            raise ValueError(f"command must be a non-empty list of strings, got {command!r}")
        self.command, self.url, self.env, self.cwd = command, url, env, cwd
        self.start_timeout, self.call_timeout = start_timeout, call_timeout
        self._session: Any = None
        self._stop: asyncio.Event | None = None
        self._done: concurrent.futures.Future | None = None
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        self.garbage_lines = 0
        """Lines of the server's stdout that were not JSON-RPC (skipped)."""

    @property
    def where(self) -> str:
        return shlex.join(self.command) if self.command else str(self.url)

    @property
    def alive(self) -> bool:
        return self._session is not None and self._done is not None and not self._done.done()

    def stderr_tail(self, since: int = 0) -> str:
        """The end of what the server wrote to stderr (from byte ``since`` on)."""
        try:
            self._stderr.flush()
            self._stderr.seek(since)
            return self._stderr.read()[-STDERR_TAIL:]
        except (OSError, ValueError):
            return ""

    def _stderr_size(self) -> int:
        try:
            return os.fstat(self._stderr.fileno()).st_size
        except (OSError, ValueError):
            return 0

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> list[Any]:
        """Connect, handshake and list the server's tools (every page); raise :class:`McpStartError`."""
        loop = _Loop.get()
        ready: concurrent.futures.Future = concurrent.futures.Future()
        self._done = asyncio.run_coroutine_threadsafe(self._run(ready), loop)
        try:
            return ready.result(self.start_timeout + 5)
        except Exception as e:
            self.close()
            why = "timed out" if isinstance(e, concurrent.futures.TimeoutError) else f"{type(e).__name__}: {e}"
            tail = self.stderr_tail().strip()
            raise McpStartError(f"MCP server {self.where} did not start ({why})"
                                + (f"; its stderr ends:\n{tail}" if tail else "; it wrote nothing to stderr")) from None

    async def _run(self, ready: concurrent.futures.Future) -> None:
        self._stop = asyncio.Event()
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                from mcp import ClientSession

                session = await stack.enter_async_context(ClientSession(read, write, message_handler=self._on_message))
                await asyncio.wait_for(session.initialize(), self.start_timeout)
                tools = await asyncio.wait_for(_list_tools(session), self.start_timeout)
                self._session = session
                ready.set_result(tools)
                await self._stop.wait()
        except BaseException as e:  # noqa: BLE001 - reported through ``ready``; a later death ends calls
            if not ready.done():
                ready.set_exception(e if isinstance(e, Exception) else RuntimeError(repr(e)))
        finally:
            self._session = None

    def _transport(self) -> Any:
        if self.url is not None:
            from mcp.client.streamable_http import streamable_http_client

            return streamable_http_client(self.url)
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command=sys.executable, args=[GUARD, str(os.getpid()), "--", *self.command],
                                       env=self.env, cwd=self.cwd, encoding_error_handler="replace")
        return stdio_client(params, errlog=self._stderr)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):  # a line the transport could not parse
            self.garbage_lines += 1

    def close(self) -> None:
        """End the session; the SDK stops the server's process group. Idempotent, never raises."""
        done, stop, self._done = self._done, self._stop, None
        if done is not None and not done.done():
            loop = _Loop.get()
            if stop is not None:
                loop.call_soon_threadsafe(stop.set)
            else:
                done.cancel()
            try:
                done.result(_CLOSE_GRACE)
            except BaseException:  # noqa: BLE001 - closing must not fail
                done.cancel()
        self._session = None

    # ---- calls -----------------------------------------------------------------------------
    def call(self, name: str, arguments: dict[str, Any] | None, timeout: float | None = None) -> CallOutcome:
        """Call one tool; never raises (see :class:`CallOutcome`)."""
        timeout = self.call_timeout if timeout is None else timeout
        session = self._session
        if session is None or not self.alive:
            return CallOutcome(f"Error: the MCP server is not running (it exited or was closed); "
                               f"{name} was not called.", "server_error")
        before = self._stderr_size()
        fut = asyncio.run_coroutine_threadsafe(
            asyncio.wait_for(session.call_tool(name, arguments or {}), timeout), _Loop.get())
        try:
            result = fut.result(timeout + 5)
        except (asyncio.TimeoutError, concurrent.futures.TimeoutError):
            fut.cancel()
            return CallOutcome(f"Error: {name} did not answer within {timeout:g} s.", "timeout")
        except Exception as e:  # noqa: BLE001 - a protocol error or a dead connection is an observation
            return CallOutcome(self._failure(name, e, before), "server_error")
        text = result_text(result)
        structured = sdk_field(result, "structured_content")
        if sdk_field(result, "is_error"):
            return CallOutcome(f"Error: {text}" if not text.startswith("Error") else text, "tool_error", structured)
        return CallOutcome(text, None, structured)


    def _failure(self, name: str, e: Exception, stderr_from: int) -> str:
        """A call that got no answer, for the model; a closed connection ends the session, and the
        text then quotes what the server wrote to stderr during the call (its last words)."""
        from mcp_types import CONNECTION_CLOSED

        text = f"Error: calling {name} failed: {type(e).__name__}: {e}"[:1000]
        if getattr(e, "code", None) != CONNECTION_CLOSED:
            return text
        self._session = None  # every later call answers "not running" at once
        tail = self.stderr_tail(stderr_from).strip()[-500:]
        return (f"Error: calling {name} failed: the connection to the MCP server closed (it exited or crashed)"
                + (f"; its stderr ends:\n{tail}" if tail else "."))


async def _list_tools(session: Any) -> list[Any]:
    tools, cursor = [], None
    for _ in range(1000):  # a server that pages forever is cut off, not followed
        from mcp.types import PaginatedRequestParams

        page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.extend(page.tools)
        cursor = sdk_field(page, "next_cursor")
        if not cursor:
            break
    return tools
