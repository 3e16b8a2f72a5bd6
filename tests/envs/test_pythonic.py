import pytest

from envs.pythonic import parse_pythonic_calls, render_pythonic_calls, strip_fences


def calls(text):
    r = parse_pythonic_calls(text)
    assert r.error is None, r.error
    return [(c.name, c.arguments) for c in r.calls]


def test_list_of_calls_with_literals():
    got = calls("[f(a=1, b=-2.5, c='x'), math.g(d=[1, (2, 3)], e={'k': None}, t=True)]")
    assert got == [("f", {"a": 1, "b": -2.5, "c": "x"}),
                   ("math.g", {"d": [1, (2, 3)], "e": {"k": None}, "t": True})]


def test_brackets_and_fences_are_optional():
    assert calls("f(a=1)") == [("f", {"a": 1})]
    assert calls("```python\n[f(a=1)]\n```") == [("f", {"a": 1})]
    assert strip_fences("  `[f()]`  ") == "[f()]"


def test_bare_names_and_arithmetic_like_bfcl():
    assert calls("[f(unit=celsius, n=3*4)]") == [("f", {"unit": "celsius", "n": 12})]


def test_empty_output_decodes_to_no_calls():
    for text in ["", "[]", "``` ```"]:
        r = parse_pythonic_calls(text)
        assert r.error is None and r.calls == ()


@pytest.mark.parametrize("text", ["[f(1)]", "[f(**kw)]", "[1, 2]", "[f(a=1]", "hello world", "[f(a=1/0)]",
                                  "[f(a=-'x')]", "[f(a={**d})]", "[(lambda: 1)()]"])
def test_undecodable_outputs_are_errors(text):
    r = parse_pythonic_calls(text)
    assert r.error and not r.calls


def test_huge_and_deep_inputs():
    assert parse_pythonic_calls("[f(a=" + "[" * 5000 + "]" * 5000 + ")]").error
    assert parse_pythonic_calls("x" * 300_000).error


def test_render_round_trip():
    src = [("f", {"a": 1, "b": "it's"}), ("g", {})]
    assert calls(render_pythonic_calls(src)) == src
