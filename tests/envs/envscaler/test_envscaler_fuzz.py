"""No action may raise from EnvScalerEnv.step: every defect is an observation or an ended episode."""

import json
import warnings
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from envs.envscaler.env import EnvScalerEnv

FIX = Path(__file__).parent / "fixtures"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
names = st.sampled_from(
    [
        "find_account",
        "deposit",
        "transfer",
        "audit",
        "registry_size",
        "ghost_tool",
        "_close_all",
        "__init__",
        "accounts",
        "__class__",
        "chat_with_user",
        "",
    ]
) | st.text(max_size=8)
args = (
    st.dictionaries(
        st.sampled_from(["owner", "account_id", "amount", "from_id", "to_id", "content", "x"]),
        json_values,
        max_size=3,
    )
    | json_values
)
calls = st.builds(lambda n, a: json.dumps({"name": n, "arguments": a}), names, args)
fragments = st.one_of(
    st.text(max_size=60),
    calls.map(lambda c: f"<tool_call>\n{c}\n</tool_call>"),
    calls.map(lambda c: f"<tool_call>{c[: len(c) // 2]}"),
    st.sampled_from(["<tool_call>", "</tool_call>", "<think>", "</think>", "{", "}", "Task Completed"]),
)
actions = st.lists(fragments, max_size=5).map("".join)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    ENV = EnvScalerEnv(FIX / "envs.jsonl", FIX / "scenarios.jsonl", max_steps=4)
    ENV.tasks  # noqa: B018


@given(st.lists(actions, min_size=1, max_size=5), st.sampled_from(["env_tiny-task_1", "env_tiny-task_2"]))
def test_random_actions_never_raise(texts, task_id):
    ENV.reset(options={"task_id": task_id})
    for text in texts:
        obs, r, term, trunc, info = ENV.step(text)
        assert isinstance(obs, str) and isinstance(r, float) and 0.0 <= r <= 1.0
        if term or trunc:
            assert info["final_reward"] == r
            break
        assert r == 0.0
