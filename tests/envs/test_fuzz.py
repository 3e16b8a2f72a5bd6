"""No action string may raise from step(): every defect is an error observation."""
import json

from hypothesis import given
from hypothesis import strategies as st

from envs.examples.shop import ShopEnv
from envs.protocol import parse_tool_calls
from envs.pythonic import parse_pythonic_calls

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
names = st.sampled_from(["price", "add_to_cart", "checkout", "fly", "", "add_to_cart\n"]) | st.text(max_size=10)
calls = st.builds(lambda n, a: json.dumps({"name": n, "arguments": a}), names, json_values)
fragments = st.one_of(
    st.text(max_size=200),
    calls.map(lambda c: f"<tool_call>\n{c}\n</tool_call>"),
    calls.map(lambda c: f"<tool_call>{c[: len(c) // 2]}"),  # broken JSON, unclosed tag
    st.sampled_from(["<tool_call>", "</tool_call>", "<think>", "</think>", "{", "}", '"', "\\"]),
)
actions = st.lists(fragments, max_size=6).map("".join)


def run_episode(env, texts):
    env.reset(seed=0)
    for text in texts:
        obs, r, term, trunc, info = env.step(text)
        assert isinstance(obs, str) and isinstance(r, float)
        step = info.get("step")
        if step is not None:
            # Every error the parser saw is visible in the observation and counted in the record.
            assert step.n_parse_errors == len(parse_tool_calls(text).errors)
        if term or trunc:
            break


@given(st.lists(actions, min_size=1, max_size=4))
def test_random_actions_never_raise(texts):
    run_episode(ShopEnv(), texts)


@given(st.lists(actions, min_size=1, max_size=4))
def test_random_actions_never_raise_in_first_call_mode(texts):
    run_episode(ShopEnv(call_policy="first", max_steps=3), texts)


@given(st.text(max_size=300))
def test_pythonic_parser_never_raises(text):
    parse_pythonic_calls(text)
    parse_pythonic_calls("[" + text + "]")


def test_huge_and_deeply_nested_actions():
    env = ShopEnv()
    env.reset(seed=0)
    deep = '{"x": ' * 5000 + '{"item": "apple"}' + "}" * 5000  # json.dumps itself would recurse too deep
    huge_args = '{"name": "price", "arguments": ' + json.dumps({"item": "a" * 2_000_000}) + "}"
    nested = '{"name": "add_to_cart", "arguments": ' + "[" * 200_000 + "]" * 200_000 + "}"
    for text in [
        "<tool_call>" + huge_args + "</tool_call>",
        "<tool_call>" + nested + "</tool_call>",
        '<tool_call>{"name": "price", "arguments": ' + deep + "}</tool_call>",
        "<tool_call>" + '{"name": "add_to_cart", "arguments": {"item": ' + "[" * 50 + "1" + "]" * 50 + "}}</tool_call>",
        "x" * 3_000_000,
        "<tool_call>" * 10_000,
        "\x00\ud800 garbage",
    ]:
        obs, *_ = env.step(text)
        assert obs.startswith("<tool_response>\nError") or obs == ""
        env.reset(seed=0)
    obs, *_ = env.step(b"bytes are not text")
    assert "Error" in obs
