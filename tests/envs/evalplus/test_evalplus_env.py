"""The EvalPlus environments: registration, check_env, one-step episodes, verdict info."""

import gymnasium as gym
import pytest

import envs  # noqa: F401
from envs.data import has_data

pytestmark = pytest.mark.skipif(not has_data("evalplus"), reason="EvalPlus data not found; set LOPD_DATA_DIR")


@pytest.mark.parametrize("env_id", ["lopd/evalplus-humaneval-v0", "lopd/evalplus-mbpp-v0"])
def test_check_env(env_id, run_check_env):
    run_check_env(env_id)


def test_episode_rewards_the_sanitised_answer():
    env = gym.make("lopd/evalplus-humaneval-v0")
    try:
        prompt, info = env.reset(options={"task_id": "HumanEval/53"})
        assert "def add(x: int, y: int)" in prompt and prompt.startswith("Please provide a self-contained")
        assert info["tools"] == [] and info["messages"][1]["content"] == prompt
        answer = (
            "<think>sum them</think>Sure:\n```python\ndef add(x: int, y: int):\n    return x + y\n```\n"
            "That's it."
        )
        _, reward, terminated, truncated, info = env.step(answer)
        assert (reward, terminated, truncated) == (1.0, True, False)
        assert info["verdict"] == {
            "task_id": "HumanEval/53",
            "pass": True,
            "base_status": "pass",
            "plus_status": "pass",
            "mode": "strict",
        }
        env.reset(options={"task_id": "HumanEval/53"})
        _, reward, terminated, _, info = env.step("```python\ndef add(x, y):\n    return x * y\n```")
        assert reward == 0.0 and terminated and info["verdict"]["base_status"] == "fail"
        # a tool call is not special here: it is just text without the entry point
        env.reset(options={"task_id": "HumanEval/53"})
        _, reward, terminated, _, _ = env.step('<tool_call>{"name": "x", "arguments": {}}</tool_call>')
        assert reward == 0.0 and terminated
    finally:
        env.close()


def test_modes_and_bad_mode():
    env = gym.make("lopd/evalplus-humaneval-v0", mode="official")
    try:
        env.reset(options={"task_id": "HumanEval/53"})
        fake = (
            "```python\nclass T:\n    def __eq__(self, o):\n        return True\n"
            "def add(x, y):\n    return T()\n```"
        )
        _, reward, *_ = env.step(fake)
        assert reward == 1.0  # evalplus 0.3.1 accepts it: that is why training uses strict
    finally:
        env.close()
    with pytest.raises(ValueError, match="mode"):
        gym.make("lopd/evalplus-humaneval-v0", mode="lenient")
