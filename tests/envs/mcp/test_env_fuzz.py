"""No action may raise from ``lopd/mcp-v0``'s step(), whatever it sends the server: calls with names and
arguments of any shape, broken tags and JSON go to a live server and come back as observations."""

import json

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import envs  # noqa: F401 - registers lopd/mcp-v0

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
names = st.sampled_from(["add_note", "list_notes", "search_notes", "delete_note", "", "nope"]) | st.text(max_size=10)
arguments = json_values | st.fixed_dictionaries({}, optional={"text": json_values, "query": json_values,
                                                              "number": json_values})
calls = st.builds(lambda n, a: json.dumps({"name": n, "arguments": a}), names, arguments)
fragments = st.one_of(
    st.text(max_size=100),
    calls.map(lambda c: f"<tool_call>\n{c}\n</tool_call>"),
    calls.map(lambda c: f"<tool_call>{c[: len(c) // 2]}"),
    st.sampled_from(["<tool_call>", "</tool_call>", "{", "}", '"', "\\"]),
)
actions = st.lists(fragments, min_size=1, max_size=4).map("".join)


@pytest.fixture(scope="module")
def env():
    env = gym.make("lopd/mcp-v0", max_steps=4).unwrapped
    yield env
    env.close()


@pytest.mark.slow
@settings(max_examples=25)
@given(texts=st.lists(actions, min_size=1, max_size=4))
def test_random_actions_against_a_live_server_never_raise(env, texts):
    env.reset(seed=0)
    for text in texts:
        obs, reward, terminated, truncated, info = env.step(text)
        assert isinstance(obs, str) and reward in (0.0, 1.0)
        if terminated or truncated:
            assert "checks" in info
            break
    assert env.session.alive  # nothing the policy sends takes the server down
