"""``lopd serve-mcp`` (envs/mcp/serve.py) through the official MCP client: a real server subprocess on stdio,
whose tools and results are those of the same episode played in process; and ``build_server`` in process
over both protocol eras."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import gymnasium as gym
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client

import envs  # noqa: F401  (registers the lopd/* ids)
from envs import Task, ToolEnv, ToolSet, tool
from envs.mcp.serve import build_server

ROOT = Path(__file__).resolve().parents[3]
SHOP, TASK = "lopd/shop-v0", "apples"


def _episode(env_id: str = SHOP, task_id: str = TASK):
    """The episode the server plays, in process: the same reset (seed 0, the task by id)."""
    env = gym.make(env_id)
    env.reset(seed=0, options={"task_id": task_id})
    return env


def _server_params(*args: str) -> StdioServerParameters:
    keep = {k: os.environ[k] for k in ("LOPD_CACHE_DIR", "LOPD_DATA_DIR", "PYTHONPATH") if k in os.environ}
    return StdioServerParameters(command=sys.executable, args=["-m", "harness.cli", "serve-mcp", *args],
                                 cwd=str(ROOT), env=keep)


def _text(result) -> str:
    assert len(result.content) == 1 and result.content[0].type == "text"
    return result.content[0].text


def test_a_client_lists_and_calls_the_episodes_tools_over_stdio(tmp_path):
    env = _episode()
    local, task = env.unwrapped.tools, env.unwrapped.task
    calls = [("add_to_cart", {"item": "apple", "qty": 2}),  # one episode: the cart is kept between calls
             ("checkout", {}),
             ("price", {"item": "kiwi"}),                    # the tool raises
             ("nope", {"item": "apple"}),                    # an unknown tool
             ("price", {"item": 3}),                         # an argument of the wrong type
             ("price", {}),                                  # a missing argument
             ("price", {"item": "apple", "colour": "red"})]  # an unknown argument
    want = [local.call(name, args) for name, args in calls]
    log = tmp_path / "server.log"

    async def session() -> dict:
        out: dict = {}
        with log.open("w") as errlog:
            async with stdio_client(_server_params(SHOP, "--task-id", TASK), errlog=errlog) as (read, write), \
                    ClientSession(read, write) as s:
                with anyio.fail_after(30):
                    out["init"] = await s.initialize()
                    out["tools"] = (await s.list_tools()).tools
                    out["results"] = [await s.call_tool(name, args) for name, args in calls]
                    out["prompts"] = (await s.list_prompts()).prompts
                    out["prompt"] = await s.get_prompt("task")
        return out

    got = anyio.run(session)
    assert got["init"].server_info.name == SHOP
    assert task.prompt in got["init"].instructions
    schemas = {s["function"]["name"]: s["function"] for s in local.schemas}
    assert {t.name: t.input_schema for t in got["tools"]} == {n: f["parameters"] for n, f in schemas.items()}
    assert {t.name: t.description for t in got["tools"]} == {n: f["description"] for n, f in schemas.items()}
    for (name, _), result, expected in zip(calls, got["results"], want):
        assert (_text(result), result.is_error) == (expected.content, expected.error is not None), name
    assert [r.is_error for r in got["results"]] == [False, False, True, True, True, True, True]
    assert _text(got["results"][1]) == "4"  # two apples paid for: the calls shared one episode
    assert [p.name for p in got["prompts"]] == ["task"]
    assert got["prompt"].messages[0].content.text == task.prompt
    # the server exited by itself when the client closed its stdin (the client's SIGTERM comes only after
    # 2 s), having closed the env
    text = log.read_text()
    assert "client disconnected; env closed" in text, text
    pid = int(re.search(r"pid (\d+)", text).group(1))
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.parametrize("env_id", [SHOP, "lopd/micro-v0", "lopd/envscaler-fixture-v0"])
def test_stdout_holds_nothing_but_protocol_messages(env_id):
    """A client that sends nothing and closes stdin reads nothing: importing the CLI and the registry,
    making and resetting the env and serving print nothing to stdout; the server exits 0."""
    p = subprocess.run([sys.executable, "-m", "harness.cli", "serve-mcp", env_id], cwd=ROOT,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout == b""
    assert f"serving {env_id} task" in p.stderr.decode()


def test_the_env_registry_and_torch_free_envs_print_nothing():
    code = ("import harness.cli, envs.registry as r; harness.cli.build_parser(); r.load_all()\n"
            "for e in ('lopd/shop-v0', 'lopd/micro-v0', 'lopd/envscaler-fixture-v0'):\n"
            "    env = r.make(e); env.reset(seed=0); env.close()\n"
            "import sys; assert 'torch' not in sys.modules")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""


class _Odd:
    @tool
    def echo(self, text: str) -> str:
        """Say it back."""
        return text


class _Raising(ToolSet):
    def call(self, name, arguments):
        raise RuntimeError("boom")


class _OddEnv(ToolEnv):
    """Tools of its own: one whose schema has no ``type``, and (task 'raise') a tool set whose call raises."""

    def load_tasks(self):
        return [Task("plain", "Echo hi."), Task("raise", "Try.", split="eval")]

    def setup(self, task):
        tools = _Raising() if task.task_id == "raise" else ToolSet()
        tools.add(lambda text: text, {"type": "function", "function": {
            "name": "echo", "description": "Say it back.", "parameters": {"properties": {"text": {"type": "string"}}}}})
        return tools

    def verify(self, task, state):
        return 0.0


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # auto: the 2026-07-28 era; legacy: the handshake
def test_build_server_in_process_in_both_eras(mode):
    env = gym.make(SHOP)

    async def session():
        async with Client(build_server(env, task_id="mix"), mode=mode) as c:
            return (c.protocol_version, c.instructions, await c.list_tools(),
                    await c.call_tool("price", {"item": "pear"}), await c.call_tool("price", {"item": 1}))

    version, instructions, tools, ok, bad = anyio.run(session)
    assert (version >= "2026") == (mode == "auto"), version
    assert env.unwrapped.task.task_id == "mix" and env.unwrapped.task.prompt in instructions
    assert sorted(t.name for t in tools.tools) == ["add_to_cart", "checkout", "price"]
    assert (_text(ok), ok.is_error) == ("3", False)
    assert bad.is_error and "must be a string" in _text(bad)


def test_an_object_schema_and_a_raising_tool_set_are_served_safely():
    env = _OddEnv()

    async def session():
        async with Client(build_server(env, task_id="plain")) as c:
            schema = (await c.list_tools()).tools[0].input_schema
            ok = await c.call_tool("echo", {"text": "hi"})
        async with Client(build_server(env, task_id="raise")) as c:
            return schema, ok, await c.call_tool("echo", {"text": "hi"})

    schema, ok, raised = anyio.run(session)
    assert schema == {"type": "object", "properties": {"text": {"type": "string"}}}
    assert (_text(ok), ok.is_error) == ("hi", False)
    assert raised.is_error and "RuntimeError: boom" in _text(raised)


def test_build_server_names_the_tasks_of_an_unknown_task_id():
    with pytest.raises(KeyError, match=r"lopd/shop-v0 has no task 'nope'; its tasks: apples, mix"):
        build_server(gym.make(SHOP), task_id="nope")
