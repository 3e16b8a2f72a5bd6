import json

import pytest

from envs.protocol import (
    MAX_JSON_DEPTH,
    parse_tool_calls,
    render_tool_call,
    render_tool_calls,
    render_tools_system_prompt,
    wrap_tool_response,
)


def call(name, args):
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


def test_single_call_with_think_and_content():
    text = "<think>look it up</think>Sure.\n" + call("get_user", {"id": 7})
    r = parse_tool_calls(text)
    assert r.reasoning == "look it up"
    assert r.content == "Sure."
    assert [(c.name, c.arguments, c.error) for c in r.calls] == [("get_user", {"id": 7}, None)]
    assert r.error is None and r.errors == []


def test_several_calls_keep_order():
    r = parse_tool_calls(call("a", {"x": 1}) + "\n" + call("b", {}) + call("c", {"y": [1, 2]}))
    assert [c.name for c in r.calls] == ["a", "b", "c"]
    assert r.calls[2].arguments == {"y": [1, 2]}


def test_arguments_as_json_string():
    text = '<tool_call>\n{"name": "f", "arguments": "{\\"q\\": \\"x\\"}"}\n</tool_call>'
    c = parse_tool_calls(text).calls[0]
    assert (c.name, c.arguments, c.error) == ("f", {"q": "x"}, None)


def test_missing_arguments_means_empty_object():
    c = parse_tool_calls('<tool_call>{"name": "f"}</tool_call>').calls[0]
    assert c.ok and c.arguments == {}


def test_template_opened_think_block():
    # Qwen3 templates may open <think> in the prompt, so the response starts inside it.
    r = parse_tool_calls("reasoning here</think>\n" + call("f", {}))
    assert r.reasoning == "reasoning here" and r.calls[0].name == "f"


@pytest.mark.parametrize("body, fragment", [
    ('{"name": "f", "arguments": {', "not valid JSON"),
    ('{"arguments": {}}', "no 'name'"),
    ('{"name": "", "arguments": {}}', "no 'name'"),
    ('["f"]', "must be a JSON object"),
    ('{"name": "f", "arguments": [1]}', "must be an object"),
    ('{"name": "f", "arguments": "{oops"}', "not valid JSON"),
])
def test_malformed_calls_give_structured_errors(body, fragment):
    r = parse_tool_calls(f"<tool_call>{body}</tool_call>")
    assert len(r.calls) == 1 and fragment in r.calls[0].error


def test_unclosed_tag():
    r = parse_tool_calls(call("ok", {}) + '<tool_call>{"name": "f", "arguments": {}}')
    assert r.error == "unclosed <tool_call> tag"
    assert [c.ok for c in r.calls] == [True, False]


def test_stray_close_and_nested_open():
    assert "without a matching" in parse_tool_calls("hi </tool_call>").error
    r = parse_tool_calls('<tool_call>{"name": "a"}<tool_call>{"name": "b"}</tool_call>')
    assert r.error and r.calls[0].error == "unclosed <tool_call> tag" and r.calls[1].name == "b"


def test_deep_nesting_is_an_error_not_a_crash():
    deep = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    c = parse_tool_calls(f'<tool_call>{{"name": "f", "arguments": {{"x": {deep}}}}}</tool_call>').calls[0]
    assert "nested deeper" in c.error
    very_deep = "[" * 100_000
    assert parse_tool_calls(f"<tool_call>{very_deep}</tool_call>").calls[0].error


def test_non_string_input():
    assert parse_tool_calls(None).error.startswith("response must be a string")


def test_render_round_trip():
    text = render_tool_calls([("a", {"x": "é"}), {"name": "b", "arguments": {}}])
    assert text == '<tool_call>\n{"name": "a", "arguments": {"x": "é"}}\n</tool_call>\n' \
                   '<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call>'
    assert [(c.name, c.arguments) for c in parse_tool_calls(text).calls] == [("a", {"x": "é"}), ("b", {})]
    assert render_tool_call("f", {}) == call("f", {})


def test_tools_system_prompt_matches_qwen3_template_text():
    fn = {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}
    got = render_tools_system_prompt([fn], system="You are helpful.")
    expected = (
        "You are helpful.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        '{"type": "function", "function": {"name": "f", "description": "d", "parameters": '
        '{"type": "object", "properties": {}}}}\n</tools>\n\n'
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )
    assert got == expected
    assert render_tools_system_prompt([{"type": "function", "function": fn}]) == expected.split("\n\n", 1)[1]


def test_tool_response_wrapping():
    assert wrap_tool_response("42") == "<tool_response>\n42\n</tool_response>"
