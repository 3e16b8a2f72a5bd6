"""The LiveCodeBench environment: check_env, lcb's prompt, one-step episodes, the public-only note."""

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from lcb_records import SUM_OK, TWO_SUM_OK

import envs  # noqa: F401
from envs.data import has_data


@pytest.mark.skipif(not has_data("livecodebench"), reason="LiveCodeBench data not found; set LOPD_DATA_DIR")
def test_check_env_and_public_only_note():
    env = gym.make("lopd/livecodebench-v0")
    try:
        check_env(env.unwrapped, skip_render_check=False)
        _, info = env.reset(options={"task_id": "2727"})
        assert info["messages"][0]["content"].startswith("You are an expert Python programmer.")
        code = (
            "class Solution:\n    def countSeniors(self, details):\n"
            "        return sum(int(d[11:13]) > 60 for d in details)\n"
        )
        _, reward, terminated, _, info = env.step(f"<think>ages</think>\n```python\n{code}```")
        assert reward == 1.0 and terminated and "NOT a LiveCodeBench score" in info["verdict"]["note"]
    finally:
        env.close()


def test_own_records_episode(own_file):
    env = gym.make("lopd/livecodebench-v0", source=str(own_file), mode="official")
    try:
        prompt, _ = env.reset(options={"task_id": "own_twosum"})
        assert "### Format: You will use the following starter code" in prompt and "def twoSum" in prompt
        _, reward, *_, info = env.step(f"```python\n{TWO_SUM_OK}```")
        assert (
            reward == 1.0
            and info["verdict"]["results"] == [True, True, True]
            and "note" not in info["verdict"]
        )
        prompt, _ = env.reset(options={"task_id": "own_sum"})
        assert "Read the inputs from stdin" in prompt
        _, reward, *_ = env.step(f"first try\n```python\nprint(0)\n```\nfixed:\n```python\n{SUM_OK}```")
        assert reward == 1.0
        env.reset(options={"task_id": "own_sum"})
        assert env.step("no code block at all")[1] == 0.0
    finally:
        env.close()
    env = gym.make("lopd/livecodebench-v0", source=str(own_file), start_date="2024-03-01")
    assert [t.task_id for t in env.unwrapped.tasks] == ["own_twosum"]
    env.close()
