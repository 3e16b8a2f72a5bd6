import sys

import gymnasium as gym
import psutil
import pytest

import envs  # noqa: F401 - registers lopd/mcp-v0
from envs.mcp.client import McpStartError


def call(name, **arguments):
    import json
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


def server_pids(episode_dir):
    return [p.pid for p in psutil.process_iter(["cmdline"]) if episode_dir in " ".join(p.info["cmdline"] or [])]


def test_the_default_env_plays_an_episode_to_its_verdict():
    env = gym.make("lopd/mcp-v0")
    try:
        obs, info = env.reset(options={"task_id": "note-two"})
        assert "two notes" in obs
        assert [t["function"]["name"] for t in info["tools"]] == ["add_note", "list_notes", "search_notes", "delete_note"]
        env.step(call("add_note", text="call Ana"))
        obs, *_ = env.step(call("add_note", text="pay rent") + call("nope") + call("delete_note", number=9))
        assert "saved note 2" in obs and "unknown tool 'nope'" in obs and "there is no note 9" in obs
        obs, reward, terminated, truncated, info = env.step("There are 2 notes.")
        assert (reward, terminated) == (1.0, True) and all(c["held"] for c in info["checks"])
        # a new episode starts on a clean server: the notes are gone
        env.reset(options={"task_id": "note-two"})
        obs, reward, *_ = env.step("There are 2 notes.")
        assert reward == 0.0
    finally:
        env.close()


def test_close_and_garbage_collection_leave_no_server_process():
    env = gym.make("lopd/mcp-v0").unwrapped
    env.reset(seed=0)
    folder = env.episode_dir
    assert server_pids(folder)
    env.close()
    assert server_pids(folder) == []
    env = gym.make("lopd/mcp-v0").unwrapped
    env.reset(seed=0)
    folder = env.episode_dir
    del env
    import gc
    gc.collect()
    assert server_pids(folder) == []


def test_a_server_that_never_starts_names_its_command_and_stderr(tmp_path):
    bad = [sys.executable, "-c", "import sys; print('boom: cannot start', file=sys.stderr); sys.exit(1)"]
    env = gym.make("lopd/mcp-v0", server=bad, tasks=[{"task_id": "t", "prompt": "p",
                                                     "check": [{"answer_contains": "x"}]}], start_timeout=10)
    with pytest.raises(McpStartError) as e:
        env.reset(seed=0)
    assert "boom: cannot start" in str(e.value) and "did not start" in str(e.value) and "sys.exit(1)" in str(e.value)
    env.close()
