"""ACEBench's output decoding, quirks included."""

import pytest

from envs.acebench.decode import decode_fc, decode_prompt, is_call_list, remove_whitespace


@pytest.mark.parametrize(
    "text, calls",
    [
        ("[f(a=1)]", [{"f": {"a": 1}}]),
        (
            "[get_weather(city='New York')]",
            [{"get_weather": {"city": "NewYork"}}],
        ),  # all whitespace goes first
        ("(f(a=1),)", [{"f": {"a": 1}}]),  # tuples and sets have .elts
        ("{f(a=1)}", [{"f": {"a": 1}}]),
        ("[f(1, a=2)]", [{"f": {"a": 2}}]),  # positional arguments are dropped
        ("[f(a=+5)]", [{"f": {"a": -5}}]),  # any unary op negates its constant
        ("[f(a = not True)]", [{"f": {"a": "notTrue"}}]),  # whitespace removal makes a name of it
        ("[f(a=x)]", [{"f": {"a": "x"}}]),
        ("[f(a=g(b=1))]", [{"f": {"a": {"g": {"b": 1}}}}]),
        ("[f(a=g())]", [{"f": {"a": {"g": {}}}}]),
        ("[f(a='x'+'y', b=3*4)]", [{"f": {"a": "xy", "b": 12}}]),
        ("[f(a=2**2000-2**2000, b=(1<<5000)>>5000)]", [{"f": {"a": 0, "b": 1}}]),  # big but allowed
        ("[f(a=b[1:2])]", [{"f": {"a": "b[1:2]"}}]),
        ("[f(**{'a':1})]", [{"f": {None: {"a": 1}}}]),
        ("[f(a=...)]", [{"f": {"a": "..."}}]),
        ("[a.b.c(x=(1,2))]", [{"a.b.c": {"x": (1, 2)}}]),
        ("[]", []),
        ("[f(a=1,a=2)]", [{"f": {"a": 2}}]),  # ast accepts repeated keywords; the last one wins
        ("```python\n[f(a=1)]\n```", None),  # fences are not stripped upstream
    ],
)
def test_prompt_decoding(text, calls):
    d = decode_prompt(text)
    assert d.calls == calls
    assert (d.error is None) == (calls is not None)


@pytest.mark.parametrize(
    "text",
    [
        "f(a=1)",  # no brackets: a Call has no .elts
        "[f(a=-(-5))]",
        "[f(a=x+1)]",
        "[f(a=lambda: 1)]",
        "[f(a={1,2})]",
        "[f(a=f'x')]",
        "[f(a=x.y)]",
        "[1]",
        "[f(a=2**100000)]",
        "[f(a=((10**1000)**1000)**1000)]",
        "[f(a=1<<10**9)]",
        "[f(a='x'*10**9)]",
        "[f(a=1/0)]",
        "",
        "[[[[",
        "\x00",
    ],
)
def test_prompt_decode_failures(text):
    d = decode_prompt(text)
    assert d.calls is None and d.error.startswith("Invalid syntax. Failed to decode AST.")


def test_non_string_outputs_fail_like_upstream():
    for value in (None, 3, ["[f()]"], {"f": {}}):
        d = decode_prompt(value)
        assert d.calls is None and "has no attribute 'split'" in d.error


def test_remove_whitespace_covers_unicode_spaces():
    assert remove_whitespace("a b\tc\nd\u3000e\xa0f") == "abcdef"


def test_fc_decoding():
    assert decode_fc([{"f": '{"a": 1}'}]).calls == [{"f": {"a": 1}}]
    assert decode_fc([{"f": {"a": 1}}]).calls == [{"f": {"a": 1}}]
    assert decode_fc('[{"f": "{}"}]').calls == [{"f": {}}]
    for bad in ("x", [1], [{}], {"f": 1}, [{"f": "{oops"}]):
        assert decode_fc(bad).error


def test_is_call_list():
    assert is_call_list([{"f": {}}]) and is_call_list([])
    assert not is_call_list([{"f": {}}, 1]) and not is_call_list("x")
