"""``lopd serve`` against OpenEnv's own client (openenv 0.10.0's ``GenericEnvClient``, run by
``.venv-openenv`` through openenv_client.py): sessions kept apart and equal to in-process ``gym.make``,
bad requests answered to their client while the server goes on, the session limit, and no process left
behind by a client that vanishes mid-episode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import httpx
import psutil
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from served_env import served  # noqa: E402

import envs  # noqa: E402,F401
from envs.serving.venv import openenv_python  # noqa: E402
from envs.serving.wire import jsonable_info  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
CLIENT = Path(__file__).with_name("openenv_client.py")


def call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def openenv_client(url: str, op: str, arg, timeout: float = 300):
    done = subprocess.run([str(openenv_python()), str(CLIENT), url, op, json.dumps(arg)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def observed(text: str, info: dict, truncated: bool = False) -> dict:
    """What the server's observation holds for an in-process (text, info): JSON, as it travels."""
    return json.loads(json.dumps({"text": text, "truncated": truncated, **jsonable_info(info)}))


def in_process(env_id: str, plan: dict) -> dict:
    env = gym.make(env_id)
    try:
        reset = dict(plan["reset"])
        seed = reset.pop("seed", None)
        text, info = env.reset(seed=seed, options=reset or None)
        out = {"reset": {"observation": observed(text, info), "reward": None, "done": False}, "steps": []}
        for action in plan["actions"]:
            text, reward, terminated, truncated, info = env.step(action)
            out["steps"].append({"observation": observed(text, info, truncated), "reward": reward,
                                 "done": terminated or truncated})
        return out
    finally:
        env.close()


def without_openenv_metadata(result: dict) -> dict:
    for r in [result["reset"], *result["steps"]]:
        assert r["observation"].pop("metadata") == {}
    return result


@pytest.fixture(scope="module")
def shop_url():
    with served("lopd/shop-v0", max_sessions=8) as url:
        yield url


def test_eight_sessions_at_once_keep_apart_and_equal_in_process_gym_make(shop_url):
    plans = [{"reset": {"seed": i, **({"task_id": "mix"} if i % 2 else {})},
              "actions": [call("add_to_cart", item="apple", qty=i + 1),
                          call("price", item="plum" if i % 3 == 0 else "pear"),
                          call("checkout"), "That is all."]}
             for i in range(8)]
    served_results = openenv_client(shop_url, "sessions", plans)
    assert [without_openenv_metadata(r) for r in served_results] == [in_process("lopd/shop-v0", p) for p in plans]
    paid = [r["steps"][2]["observation"]["text"] for r in served_results]
    assert len(set(paid)) == 8  # each session's cart is its own: 2, 4, ... 16 paid


def test_bad_requests_are_errors_to_their_client_and_the_server_goes_on(shop_url):
    out = openenv_client(shop_url, "probes", {"seed": 0, "task_id": "apples"})
    assert "step before reset" in out["step_before_reset"]
    assert "VALIDATION_ERROR" in out["malformed_action"] and "VALIDATION_ERROR" in out["action_not_text"]
    assert out["same_session_goes_on"]["done"] is True  # the errors did not end the session's episode
    assert "no-such-task" in out["unknown_task"]
    assert out["seed_not_int"] is not None
    assert out["ten_mb_message"] is not None  # the socket is closed (1009, message too big)
    assert out["fresh_session_after_all"]["observation"]["text"] == "Buy 2 apples, then pay."
    for path in ("/reset", "/step"):  # OpenEnv's HTTP routes: a 10 MB body is refused before it is read
        r = httpx.post(shop_url + path, content=b"x" * (10 << 20), headers={"content-type": "application/json"},
                       timeout=60)
        assert r.status_code == 413, r.text[:300]
    assert httpx.get(shop_url + "/health", timeout=10).json() == {"status": "healthy"}


def test_metadata_schema_tasks_and_the_default_bind(shop_url):
    assert httpx.get(shop_url + "/metadata").json()["name"] == "lopd/shop-v0"
    schema = httpx.get(shop_url + "/schema").json()
    assert schema["action"]["required"] == ["text"] and "truncated" in schema["observation"]["properties"]
    [name] = httpx.get(shop_url + "/list_environments").json()
    tasks = httpx.post(f"{shop_url}/{name}/tasks", json={"split": "eval"}).json()["tasks"]
    assert [t["task_id"] for t in tasks] == ["mix"]
    port = int(shop_url.rsplit(":", 1)[1])
    listening = [c.laddr for p in psutil.Process().children(recursive=True)
                 for c in _connections(p) if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
    assert [a.ip for a in listening] == ["127.0.0.1"]


def _connections(p: psutil.Process) -> list:
    try:
        return p.net_connections(kind="inet")
    except psutil.Error:
        return []


def test_sessions_over_the_limit_are_refused_and_a_freed_slot_is_reused():
    with served("lopd/shop-v0", max_sessions=2) as url:
        out = openenv_client(url, "capacity", 2)
    assert "CAPACITY_REACHED" in out["refused"]
    assert out["after_closing"] is None


def _mcp_servers() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True)
            if "example_server.py" in " ".join(_cmdline(p))]


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def test_a_client_that_vanishes_mid_episode_leaves_no_process():
    with served("lopd/mcp-v0", max_sessions=2) as url:
        holder = subprocess.Popen([str(openenv_python()), str(CLIENT), url, "hold", json.dumps({"task_id": "note-two"})],
                                  cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True)
        try:
            assert json.loads(holder.stdout.readline()) == "ready"
            assert _mcp_servers()  # the session's env holds its MCP server (and its guard)
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait(timeout=30)
            deadline = time.monotonic() + 30
            while _mcp_servers() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert _mcp_servers() == []
            assert httpx.get(url + "/health", timeout=10).status_code == 200
        finally:
            if holder.poll() is None:
                os.killpg(holder.pid, signal.SIGKILL)
                holder.wait()


def test_lopd_serve_names_a_bad_env_or_keyword_before_serving():
    for args, message in [(["lopd/nope-v0"], "unknown env 'lopd/nope-v0'"),
                          (["lopd/shop-v0", "bogus=1"], "takes no keyword argument 'bogus'"),
                          (["lopd/shop-v0", "--max-sessions", "0"], "--max-sessions must be at least 1")]:
        done = subprocess.run([sys.executable, "-m", "harness.cli", "serve", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 2 and message in done.stderr, done.stderr[-2000:]


def test_a_served_mcp_env_equals_in_process_though_its_client_runs_on_the_1x_sdk():
    # OpenEnv's server pins mcp < 2, so there lopd/mcp-v0's client runs on the 1.x SDK; here on 2.x
    plans = [{"reset": {"task_id": "note-two"},
              "actions": [call("add_note", text="call Ana"),
                          call("add_note", text="pay rent") + call("nope") + call("delete_note", number=9),
                          "There are 2 notes."]},
             {"reset": {"task_id": "note-two"}, "actions": [call("list_notes"), "There are no notes."]}]
    with served("lopd/mcp-v0", max_sessions=2) as url:
        got = openenv_client(url, "sessions", plans)
    assert [without_openenv_metadata(r) for r in got] == [in_process("lopd/mcp-v0", p) for p in plans]
    assert got[0]["steps"][-1]["reward"] == 1.0
