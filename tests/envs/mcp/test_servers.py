"""The MCP servers that the ``lopd/mcp-v0`` tests run (conftest.py), checked with the official 2.x
client directly: each starts, lists its tools with typed, described arguments, and answers calls,
an error result included. The 1.x notes server runs under mcp 1.x and is spoken to by this venv's
2.x client, which is the pairing the env meets with most published servers."""

import os
import subprocess
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

NOTES_TOOLS = {"add_note", "list_notes", "divide", "sleep", "crash", "garbage", "spawn_child"}
TEST_TIMEOUT_S = 15

Body = Callable[[ClientSession], Awaitable[Any]]


def substitute(cmd: list[str], episode_dir: Path) -> list[str]:
    """``cmd`` with ``{episode_dir}`` filled in, as the env does."""
    return [part.replace("{episode_dir}", str(episode_dir)) for part in cmd]


def run_stdio(cmd: list[str], errlog: Path, body: Body, **session_kwargs: Any) -> Any:
    """Starts ``cmd`` as a stdio server, initialises a session and runs ``body`` on it; a failure
    carries the server's stderr."""

    async def main() -> Any:
        with anyio.fail_after(TEST_TIMEOUT_S), open(errlog, "w") as err:
            params = StdioServerParameters(command=cmd[0], args=cmd[1:])
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write, **session_kwargs) as session:
                    await session.initialize()
                    return await body(session)

    try:
        return anyio.run(main)
    except BaseException as exc:
        raise AssertionError(f"{exc!r}; the server's stderr:\n{errlog.read_text()[-3000:]}") from exc


def run_http(url: str, body: Body) -> Any:
    async def main() -> Any:
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with streamable_http_client(url) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await body(session)

    return anyio.run(main)


def text(result: Any) -> str:
    return "".join(c.text for c in result.content if c.type == "text")


async def check_notes_tools(session: ClientSession) -> dict[str, Any]:
    """Lists the tools and checks their schemas; returns them by name."""
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == NOTES_TOOLS
    assert all(t.description for t in tools.values())
    text_arg = tools["add_note"].input_schema["properties"]["text"]
    assert text_arg["type"] == "string" and text_arg["description"]
    assert tools["add_note"].input_schema["required"] == ["text"]
    divide = tools["divide"].input_schema["properties"]
    assert [divide[k]["type"] for k in ("a", "b")] == ["number", "number"]
    assert tools["list_notes"].input_schema["properties"] == {}
    return tools


def test_the_notes_server_answers_over_stdio(notes_server, tmp_path):
    state = tmp_path / "episode"
    cmd = substitute(notes_server, state)

    async def body(session: ClientSession) -> None:
        assert session.server_info.name in ("notes-v1", "notes-v2")
        await check_notes_tools(session)
        assert (await session.call_tool("list_notes", {})).content[0].text == ""
        for n, note in enumerate(["buy milk", "call bob"], 1):
            saved = await session.call_tool("add_note", {"text": note})
            assert not saved.is_error and text(saved) == f"saved note {n}"
        listed = await session.call_tool("list_notes", {})
        assert not listed.is_error and text(listed) == "buy milk\ncall bob"
        quotient = await session.call_tool("divide", {"a": 6, "b": 3})
        assert not quotient.is_error and text(quotient) == "2.0"
        assert quotient.structured_content == {"result": 2.0}
        failed = await session.call_tool("divide", {"a": 1, "b": 0})
        assert failed.is_error is True and "divide" in text(failed)

    run_stdio(cmd, tmp_path / "stderr.txt", body)
    assert (state / "notes.txt").read_text() == "buy milk\ncall bob\n"


def test_a_garbage_stdout_line_reaches_the_client_as_an_exception_and_the_session_goes_on(
    notes_server, tmp_path
):
    seen: list[Any] = []

    async def handler(message: Any) -> None:
        seen.append(message)

    async def body(session: ClientSession) -> None:
        assert text(await session.call_tool("garbage", {})) == "ok"
        await session.call_tool("add_note", {"text": "after garbage"})
        assert text(await session.call_tool("list_notes", {})) == "after garbage"

    run_stdio(substitute(notes_server, tmp_path), tmp_path / "stderr.txt", body, message_handler=handler)
    assert len(seen) == 1 and isinstance(seen[0], Exception) and "this is not json" in str(seen[0])


def test_the_notes_server_fails_to_start_with_a_clear_message(notes_server, tmp_path):
    cmd = substitute(notes_server, tmp_path)
    done = subprocess.run(
        cmd, env={**os.environ, "NOTES_SERVER_FAIL_START": "1"}, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=TEST_TIMEOUT_S,
    )
    assert (done.returncode, done.stdout, done.stderr) == (1, "", "boom: cannot start\n")


def test_the_published_server_answers_over_stdio(published_server, tmp_path):
    async def body(session: ClientSession) -> None:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert {"get_current_time", "convert_time"} <= set(tools)
        assert tools["get_current_time"].input_schema["properties"]["timezone"]["type"] == "string"
        now = await session.call_tool("get_current_time", {"timezone": "UTC"})
        assert not now.is_error and "UTC" in text(now)
        bad = await session.call_tool("get_current_time", {"timezone": "Not/AZone"})
        assert bad.is_error is True

    run_stdio(published_server, tmp_path / "stderr.txt", body)


def test_the_notes_server_answers_over_streamable_http(http_notes_server):
    note = f"http note {uuid.uuid4().hex[:8]}"  # the server (and its state) lives for the session

    async def body(session: ClientSession) -> None:
        assert session.server_info.name == "notes-v2"
        await check_notes_tools(session)
        saved = await session.call_tool("add_note", {"text": note})
        assert not saved.is_error and text(saved).startswith("saved note ")
        listed = await session.call_tool("list_notes", {})
        assert note in text(listed).splitlines()
        assert (await session.call_tool("divide", {"a": 1, "b": 0})).is_error is True

    run_http(http_notes_server, body)
