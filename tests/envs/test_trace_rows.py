"""Episodes as OpenAI-style rows and back (envs/trace_rows.py), on hand-made rows."""
import json

import pytest

from envs.trace import CallRecord, Episode, Step
from envs.trace_rows import COLUMNS, episode_to_row, row_to_episode, steps_from_messages


def episode():
    calls = [CallRecord("f", {"a": 1}, executed=True, result="one"), CallRecord(None, None, parse_error="bad json",
             result="Error: could not parse"), CallRecord("g", {}, executed=False)]
    return Episode("e", "t", seed=4, messages=[
        {"role": "system", "content": "s"}, {"role": "user", "content": "u"},
        {"role": "assistant", "content": "text"}, {"role": "tool", "name": "f", "content": "one"},
        {"role": "tool", "name": "", "content": "Error: could not parse"}, {"role": "assistant", "content": "ok"}],
        steps=[Step(0, "text", calls=calls), Step(1, "ok", reward=1.0, terminated=True)], reward=1.0,
        meta={"run": "r", "nested": {"x": [1, 2]}})


def test_row_has_every_column_and_openai_calls():
    row = episode_to_row(episode())
    assert tuple(row) == COLUMNS
    a = row["messages"][2]
    assert a["content"] == "text"
    assert a["tool_calls"] == [
        {"id": "call_0_0", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
        {"id": "call_0_2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]
    assert [m.get("tool_call_id") for m in row["messages"][3:5]] == ["call_0_0", None]
    assert row["messages"][5]["tool_calls"] is None
    assert (row["n_steps"], row["n_tool_calls"], row["trace_version"]) == (2, 3, 1)
    json.dumps(row)  # JSON-safe throughout


def test_our_row_comes_back_whole():
    ep = episode()
    assert row_to_episode(episode_to_row(ep)) == ep


def test_a_foreign_row_rebuilds_steps_from_messages():
    msgs = [{"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}},
                {"id": "c", "type": "function", "function": {"name": "g", "arguments": {"y": 2}}},
                {"id": "d", "type": "function", "function": {"name": "h", "arguments": "{oops"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "G"}, {"role": "tool", "content": "F"},
            {"role": "assistant", "content": "done"}]
    ep = row_to_episode({"messages": msgs, "reward": 0.5}, env_id="src", task_id="7")
    assert (ep.env_id, ep.task_id, ep.split, ep.reward) == ("src", "7", "train", 0.5)
    s0, s1 = ep.steps
    assert [(c.name, c.arguments, c.executed, c.result) for c in s0.calls[:2]] == [
        ("f", {"x": 1}, True, "F"), ("g", {"y": 2}, True, "G")]  # by id, then the next unanswered
    assert s0.calls[2].parse_error.startswith("arguments are not JSON") and not s0.calls[2].executed
    assert s0.text == "" and s0.observation == "G\nF"
    assert (s1.reward, s1.terminated, s0.reward) == (0.5, True, 0.0)  # the outcome lands on the last step


@pytest.mark.parametrize("row, why", [({"reward": 1}, "no 'messages'"), ({"messages": "hi"}, "must be a list"),
                                      ({"messages": [1]}, "must be an object")])
def test_rows_of_the_wrong_shape_say_why(row, why):
    with pytest.raises(ValueError, match=why):
        row_to_episode(row)


def test_steps_from_no_assistant_message_are_none():
    assert steps_from_messages([{"role": "user", "content": "q"}], 1.0, True) == []
