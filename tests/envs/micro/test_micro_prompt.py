"""MicroEnv(prompt="compact"): a short system prompt, the same episodes and rewards."""

import gymnasium as gym
import pytest

import envs  # noqa: F401
from envs.micro.env import MicroEnv, compact_system_prompt
from envs.micro.expert import run_solver


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def test_compact_prompt_lists_every_tool_and_is_short(cache):
    full = MicroEnv(seed=0, n_train=12, n_eval=6, cache_dir=cache)
    compact = MicroEnv(seed=0, n_train=12, n_eval=6, cache_dir=cache, prompt="compact")
    for i in range(6):
        tid = f"micro_{['shop', 'bank', 'library', 'calendar', 'files', 'travel'][i]}-train-task_{i}"
        _, a = full.reset(options={"task_id": tid})
        _, b = compact.reset(options={"task_id": tid})
        sys_a, sys_b = a["messages"][0]["content"], b["messages"][0]["content"]
        assert len(sys_b) < len(sys_a) / 4
        assert a["messages"][1] == b["messages"][1] and a["tools"] == b["tools"]
        for t in b["tools"]:
            fn = t["function"]
            assert f"{fn['name']}({', '.join(fn['parameters']['properties'])})" in sys_b
        # same episode, same reward
        assert run_solver(full, tid).reward == run_solver(compact, tid).reward == 1.0


def test_prompt_option_is_checked_and_reaches_gym_make(cache):
    with pytest.raises(ValueError):
        MicroEnv(prompt="tiny")
    env = gym.make("lopd/micro-v0", n_train=12, n_eval=6, cache_dir=str(cache), prompt="compact")
    _, info = env.reset(seed=0)
    assert info["messages"][0]["content"].splitlines()[1] == "Tools:"
    assert compact_system_prompt("", []).startswith("Tools:")
