"""``lopd/mcp-v0`` against real servers (conftest.py): the notes server on the 1.x and the 2.x SDK over
stdio, the 2.x one over streamable HTTP, a published server from PyPI; every way a server can fail is an
observation; no server process outlives the env, not even a SIGKILL of the env's own process."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import gymnasium as gym
import psutil
import pytest
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401 - registers lopd/mcp-v0
from envs.mcp.client import McpStartError

NOTES_TOOLS = {"add_note", "list_notes", "divide", "sleep", "crash", "garbage", "spawn_child"}

MILK = {"task_id": "milk", "prompt": "Note that we need milk.",
        "check": [{"called": {"name": "add_note", "arguments": {"text": "buy milk"}}},
                  {"probe": {"name": "list_notes", "arguments": {}}, "expect": {"contains": "buy milk"}},
                  {"answer_matches": "(?i)saved"}]}


def call(name, **arguments):
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


def alive(pids):
    """Those of ``pids`` still running (a zombie has exited: only its parent's wait is missing)."""
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def holding(marker):
    """Pids of the processes whose command line holds ``marker`` (a server and its guard)."""
    return [p.pid for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])
            and p.pid != os.getpid()]


def wait_gone(pids, within=15.0):
    deadline = time.monotonic() + within
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive(pids)


def test_an_episode_on_each_sdk_major_version(notes_server):
    env = gym.make("lopd/mcp-v0", server=notes_server, tasks=[MILK])
    try:
        obs, info = env.reset(options={"task_id": "milk"})
        assert obs.endswith("Note that we need milk.")
        tools = {t["function"]["name"]: t["function"] for t in info["tools"]}
        assert set(tools) == NOTES_TOOLS
        assert tools["add_note"]["parameters"]["properties"]["text"]["type"] == "string"
        assert tools["add_note"]["parameters"]["required"] == ["text"]
        obs, reward, done, *_ = env.step(call("add_note", text="buy milk"))
        assert "saved note 1" in obs and not done
        obs, reward, done, truncated, info = env.step("Saved.")
        assert (reward, done) == (1.0, True) and all(c["held"] for c in info["checks"])
        first = env.unwrapped.episode_dir
        env.reset(options={"task_id": "milk"})  # a fresh server on a fresh folder: no note is left
        assert env.unwrapped.episode_dir != first and not os.path.exists(first)
        *_, info = env.step("Saved.")
        assert [c["held"] for c in info["checks"]] == [False, False, True]
        check_env(env.unwrapped)
    finally:
        env.close()


def test_the_published_server_plays_an_episode(published_server):
    task = {"task_id": "utc", "prompt": "What time is it in UTC?",
            "check": [{"called": {"name": "get_current_time", "arguments": {"timezone": "UTC"}}},
                      {"answer_contains": "UTC"}]}
    env = gym.make("lopd/mcp-v0", server=published_server, tasks=[task])
    try:
        _, info = env.reset(seed=0)
        assert {"get_current_time", "convert_time"} <= {t["function"]["name"] for t in info["tools"]}
        obs, *_ = env.step(call("get_current_time", timezone="UTC"))
        assert '"timezone": "UTC"' in obs.replace("'", '"') or "UTC" in obs
        obs, *_ = env.step(call("get_current_time", timezone="Not/AZone"))
        assert "Error" in obs
        _, reward, done, _, _ = env.step("It is now ... UTC.")
        assert (reward, done) == (1.0, True)
    finally:
        env.close()


def test_a_streamable_http_server_plays_an_episode(http_notes_server):
    note = f"http note {uuid.uuid4().hex[:8]}"  # the server and its notes outlive the episode
    task = {"task_id": "h", "prompt": f"Note: {note}.",
            "check": [{"probe": {"name": "list_notes", "arguments": {}}, "expect": {"contains": note}}]}
    env = gym.make("lopd/mcp-v0", url=http_notes_server, tasks=[task])
    try:
        _, info = env.reset(seed=0)
        assert {t["function"]["name"] for t in info["tools"]} == NOTES_TOOLS
        assert "saved note" in env.step(call("add_note", text=note))[0]
        assert env.step("Done.")[1] == 1.0
    finally:
        env.close()
    env = gym.make("lopd/mcp-v0", url=http_notes_server, tasks=[task])  # the server lives on: not ours
    try:
        env.reset(seed=0)
        assert env.step("Done.")[1] == 1.0
    finally:
        env.close()


def test_every_failure_of_a_server_is_an_observation(notes_server):
    task = {"task_id": "t", "prompt": "p", "check": [{"probe": {"name": "list_notes", "arguments": {}},
                                                      "expect": {"contains": "kept"}}]}
    env = gym.make("lopd/mcp-v0", server=notes_server, tasks=[task], call_timeout=1.0, max_steps=20)
    try:
        env.reset(seed=0)
        session = env.unwrapped.session
        assert env.step(call("garbage"))[0] == "<tool_response>\nok\n</tool_response>"  # a stray stdout line
        assert session.garbage_lines == 1
        obs = env.step(call("add_note", text="kept") + call("nope") + call("divide", a="x", b=1)
                       + call("divide", a=1, b=0) + call("add_note"))[0]
        assert "saved note 1" in obs and "unknown tool 'nope'" in obs
        assert obs.count("Error") == 4  # the unknown tool, a bad argument, the tool's error, a missing one
        start = time.monotonic()
        obs = env.step(call("sleep", seconds=60))[0]  # a hang costs the call's timeout
        assert "sleep did not answer within 1 s" in obs and time.monotonic() - start < 10
        *_, info = env.step("Done.")
        assert info["final_reward"] in (0.0, 1.0)  # the 1.x server is still asleep: its probe may time out
        hung = holding(env.unwrapped.episode_dir)
        start = time.monotonic()
        env.reset(seed=0)  # the hung server is taken down
        assert time.monotonic() - start < 20 and wait_gone(hung, 5) == []
        obs = env.step(call("crash"))[0]  # the server dies mid-call
        assert "the connection to the MCP server closed (it exited or crashed)" in obs
        assert "the MCP server is not running" in env.step(call("list_notes"))[0]
        obs, reward, done, _, info = env.step("Done.")
        assert (reward, done) == (0.0, True) and info["checks"][0]["held"] is False
        env.reset(seed=0)  # and the next episode has a server again
        assert "saved note 1" in env.step(call("add_note", text="kept"))[0]
        assert env.step("Done.")[1] == 1.0
    finally:
        env.close()


def test_a_server_that_hangs_at_start_is_a_clear_error_and_leaves_no_process():
    marker = f"never-answers-{uuid.uuid4().hex}"
    env = gym.make("lopd/mcp-v0", server=[sys.executable, "-c", "import time; time.sleep(600)", marker],
                   tasks=[{"task_id": "t", "prompt": "p", "check": [{"answer_contains": "x"}]}], start_timeout=2)
    start = time.monotonic()
    with pytest.raises(McpStartError, match=rf"did not start \(timed out\).*{marker}|{marker}.*did not start"):
        env.reset(seed=0)
    assert time.monotonic() - start < 30
    assert wait_gone(holding(marker), 5) == []
    env.close()


PLAYER = """
import json, sys, time
import gymnasium as gym
import envs
env = gym.make("lopd/mcp-v0", server=json.loads(sys.argv[1]),
               tasks=[{"task_id": "t", "prompt": "p", "check": [{"answer_contains": "x"}]}])
env.reset(seed=0)
obs, *_ = env.step('<tool_call>{"name": "spawn_child", "arguments": {}}</tool_call>')
grandchild = int(obs.split("<tool_response>")[1].split("</tool_response>")[0])
print(json.dumps({"episode_dir": env.unwrapped.episode_dir, "grandchild": grandchild}), flush=True)
time.sleep(600)
"""


def test_a_sigkill_of_the_envs_process_takes_its_server_and_the_servers_children_down(notes_server):
    player = subprocess.Popen([sys.executable, "-c", PLAYER, json.dumps(notes_server)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        line = player.stdout.readline()
        assert line, player.stderr.read()
        seen = json.loads(line)
        server = holding(seen["episode_dir"])  # the guard and the server it runs
        assert len(server) == 2 and alive([seen["grandchild"]])
        player.send_signal(signal.SIGKILL)
        player.wait(10)
        assert wait_gone([*server, seen["grandchild"]]) == []
    finally:
        player.kill()
        player.wait()
