"""The linear-time parser matches the authors' regex rules on arbitrary text."""

import json
import re
import time

from hypothesis import given
from hypothesis import strategies as st

from envs.envscaler.parse import CHAT, PARSE_ACTION_ERROR, PARSE_RESPONSE_ERROR, Action, parse_action


def regex_oracle(text: str) -> tuple:
    """The documented rules written with the authors' regexes (slow on hostile input; fine here)."""
    text = text.strip()
    ok = True
    think = re.search(r"(?:<|@)think(?:>|@)\s*(.*?)(?:<|@)/think(?:>|@)", text, re.DOTALL | re.IGNORECASE)
    if not think and re.search(r"(?:<|@)think(?:>|@)", text, re.IGNORECASE):
        ok = False
    calls = list(re.finditer(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", text, re.DOTALL))
    body = calls[0].group(1) if calls else None
    if not calls and "<tool_call>" in text and "</tool_call>" not in text:
        ok = False
    if think and body:
        content = text[think.end() : calls[0].start()].strip()
    elif think:
        content = text[think.end() :].strip()
    elif body:
        content = text[: calls[0].start()].strip()
    else:
        content = text.strip()
    fn = None
    if body:
        try:
            d = json.loads(body)
            if all(k in d for k in ("name", "arguments")):
                fn = d
            else:
                ok = False
        except json.JSONDecodeError:
            ok = False
    if not ok:
        return (None, None, PARSE_RESPONSE_ERROR)
    if fn is not None:
        args = fn["arguments"]
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                return (None, None, PARSE_ACTION_ERROR)
        return (fn["name"], args, None)
    if content:
        return (CHAT, {"content": content}, None)
    return (None, None, PARSE_ACTION_ERROR)


pieces = st.sampled_from(
    [
        "<tool_call>",
        "</tool_call>",
        "<think>",
        "</think>",
        "@think@",
        "<THINK>",
        "@/think>",
        "{",
        "}",
        " ",
        "\n",
        '{"name": "f", "arguments": {"x": 1}}',
        '{"name": "g", "arguments": "{\\"y\\": 2}"}',
        '{"name": "h"}',
        '"arguments": {}',
        "Task Completed",
        "x",
        '{"a": {"b": 1}}',
        "\u3000",
        "\x1c",
    ]
)
texts = st.lists(pieces | st.text(max_size=5), max_size=14).map("".join)


@given(texts)
def test_parser_agrees_with_the_regex_rules(text):
    a = parse_action(text)
    assert (a.name, a.arguments, a.error) == regex_oracle(text)


def test_examples():
    assert parse_action('<tool_call>{"name": "f", "arguments": {}}</tool_call>') == Action("f", {}, None, 1)
    two = (
        '<tool_call>{"name": "a", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "b", "arguments": {}}</tool_call>'
    )
    assert parse_action(two).name == "a" and parse_action(two).n_blocks == 2
    # a first block that is not JSON-object-shaped is skipped by the regex: the second one runs
    assert parse_action("<tool_call>oops</tool_call>" + two).name == "a"
    # a call inside the think block still counts (the authors search the whole text)
    assert parse_action('<think><tool_call>{"name": "t", "arguments": {}}</tool_call></think>').name == "t"
    assert parse_action("<think>a</think>   ").error == PARSE_ACTION_ERROR
    assert parse_action("<think>a</think> bye").arguments == {"content": "bye"}


def test_hostile_inputs_are_linear():
    t0 = time.perf_counter()
    for text in [
        "<tool_call>{" * 100_000 + "</tool_call>",
        "<think>" * 100_000 + "</think>",
        "<tool_call> " * 50_000 + "}" + "</tool_call>" * 50_000,
    ]:
        parse_action(text)
    assert time.perf_counter() - t0 < 5.0
