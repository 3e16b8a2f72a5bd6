import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from envs.data import DataNotFoundError
from envs.registry import register_env, registered_ids


def test_every_registration_module_imports():
    from envs.registry import load_errors

    registered_ids()
    assert load_errors == {}


def test_namespace_is_enforced():
    with pytest.raises(ValueError, match="namespace"):
        register_env("shop-v0", "envs.examples.shop:ShopEnv")


@pytest.mark.parametrize("env_id", registered_ids())
def test_check_env_passes_for_every_registered_id(env_id):
    try:
        env = gym.make(env_id)
    except DataNotFoundError as e:
        pytest.skip(str(e))
    try:
        check_env(env.unwrapped, skip_render_check=False)
    except DataNotFoundError as e:  # data-backed envs load their tasks lazily, at the first reset
        pytest.skip(str(e))
    finally:
        env.close()


HOSTILE = ["x" * 200_000, "[" * 100_000, "<tool_call>\n{\"name\": \"nope\", \"arguments\": {\"a\": 1}}\n</tool_call>",
           "<tool_call>{\"name\":", "<think>unclosed \x00\ud800", "```python\nimport os; os._exit(3)\n```"]


@pytest.mark.slow
@pytest.mark.parametrize("env_id", registered_ids())
def test_hostile_actions_give_observations_in_every_registered_env(env_id):
    try:
        env = gym.make(env_id)
        env.reset(seed=0)
    except DataNotFoundError as e:
        pytest.skip(str(e))
    try:
        for text in HOSTILE:
            obs, reward, term, trunc, _ = env.step(text)
            assert isinstance(obs, str) and isinstance(reward, float)
            if term or trunc:
                env.reset(seed=0)
    finally:
        env.close()
