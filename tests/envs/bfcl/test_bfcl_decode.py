"""BFCL's decoders, quirks included (each expectation was checked against bfcl-eval 2025.8.6.2)."""
import doctest

import pytest

from envs.bfcl import ast_checker, convert, decode, execution, java_js, prompts, replay, scoring
from envs.bfcl.decode import (
    DecodeError,
    decode_ast_fc,
    decode_ast_prompt,
    decode_execute_fc,
    decode_execute_prompt,
    is_empty_output,
    is_function_calling_format,
)


@pytest.mark.parametrize("module", [ast_checker, convert, decode, execution, java_js, prompts, replay, scoring])
def test_docstring_examples(module):
    assert doctest.testmod(module).failed == 0


@pytest.mark.parametrize("text, expected", [
    ("[f(a=1)]", [{"f": {"a": 1}}]),
    ("f(a=1), g(b='x')", [{"f": {"a": 1}}, {"g": {"b": "x"}}]),
    ("```\n[f(a=1)]\n```", [{"f": {"a": 1}}]),
    ("  [pkg.mod.f(a=[1, 2], b={'k': (3, 4)})]\n", [{"pkg.mod.f": {"a": [1, 2], "b": {"k": (3, 4)}}}]),
    ("[f(1, 2, a=3)]", [{"f": {"a": 3}}]),          # positional arguments are dropped
    ("[f(a=+5)]", [{"f": {"a": -5}}]),              # any unary operator negates the constant
    ("[f(a=not True)]", [{"f": {"a": -1}}]),
    ("[f(a=x)]", [{"f": {"a": "x"}}]),              # a bare name is its identifier
    ("[f(a=g(1))]", [{"f": {"a": "g(1)"}}]),        # nested call without keywords: its source
    ("[f(a=g(b=1))]", [{"f": {"a": {"g": {"b": 1}}}}]),
    ("[f(a=x[1])]", [{"f": {"a": "x[1]"}}]),
    ("[f(a=2*3+1)]", [{"f": {"a": 7}}]),            # arithmetic is evaluated
    ("[f(a=...)]", [{"f": {"a": "..."}}]),
    ("[f(a=None)]", [{"f": {"a": None}}]),
    ("{f(a=1)}", [{"f": {"a": 1}}]),                # a set of calls is a list of calls
    ("[f(a=1, a=2)]", [{"f": {"a": 2}}]),           # a repeated keyword: the last one wins
    ("[f(**k)]", [{"f": {None: "k"}}]),
    ("[f(a=[1]*3)]", [{"f": {"a": [1, 1, 1]}}]),
])
def test_python_prompt_decoding(text, expected):
    assert decode_ast_prompt(text) == expected


@pytest.mark.parametrize("text", [
    "[]", "", "hello world", "[f(a=math.pi)]", "[f(a=lambda: 1)]", "[f(a={1, 2})]", "[f(a=f'{x}')]",
    "[f(a=1 < 2)]", "[f(a=-x)]", "[f(a=1/0)]", "[f(a=y+1)]", "```python\n[f(a=1)]\n```", "[f(a=1), 3]",
    "[f(a={**d})]", "[f(a=-'s')]", "[f(a=[1]*10**9)]", "[f(a=2**10**9)]",
])
def test_python_prompt_decode_failures(text):
    with pytest.raises(DecodeError):
        decode_ast_prompt(text)


def test_python_prompt_decode_rejects_non_strings_and_huge_input():
    with pytest.raises(DecodeError):
        decode_ast_prompt(["[f()]"])
    with pytest.raises(DecodeError):
        decode_ast_prompt("[f(a='" + "x" * 600_000 + "')]")


def test_java_and_javascript_prompt_decoding():
    assert decode_ast_prompt('[Foo.bar(a="x y", b=mapArea, c=new int[]{1, 2})]', "Java") == \
        [{"Foo.bar": {"a": "x y", "b": "mapArea", "c": "new int[]{1,2}"}}]
    assert decode_ast_prompt('[f(m=new HashMap<String, Object>() {{ put("k", 1); }})]', "Java") == \
        [{"f": {"m": "new HashMap<String,Object>()"}}]  # the anonymous class body is dropped
    assert decode_ast_prompt("[obj.f(a=true)]", "Java") == [{"obj.f": {"a": "true"}}]
    for bad in ("[f(a=1), g(b=2)]", "[f(a=1)]", "[notacall]", "[f(a=)]", '[o.f(a=1, a=2)]'):
        with pytest.raises(DecodeError):  # tree-sitter reports an ERROR node for each
            decode_ast_prompt(bad, "Java")
    assert decode_ast_prompt("[f(a='x', b=[1, 2], c={k: 1})]", "JavaScript") == \
        [{"f": {"a": "x", "b": "[1, 2]", "c": "{k: 1}"}}]
    assert decode_ast_prompt("[x]", "JavaScript") is None
    with pytest.raises(DecodeError):
        decode_ast_prompt("[f(a=1, a=2)]", "JavaScript")


def test_fc_decoding():
    assert decode_ast_fc([{"a_b": '{"x": [1, 2]}'}, {"c": "{}"}]) == [{"a_b": {"x": [1, 2]}}, {"c": {}}]
    assert decode_ast_fc([]) == [] and decode_ast_fc("") == []
    assert decode_ast_fc([{"f": '[1]'}]) == [{"f": [1]}]  # decodes, then fails the format check
    assert not is_function_calling_format([{"f": [1]}])
    for bad in ("text", [{"f": {"x": 1}}], [{}], [{"f": "{bad"}], None, 3, [["f"]], {"f": "{}"}):
        with pytest.raises(DecodeError):
            decode_ast_fc(bad)


def test_execute_decoding_renders_call_strings():
    assert decode_execute_prompt("[cd(folder='a'), ls()]") == ["cd(folder='a')", "ls()"]
    assert decode_execute_prompt("[f(x={'g': {'y': 1}})]") == ["f(x=g(y=1))"]  # dict of dicts -> a call
    assert decode_execute_prompt("[f(x={'k': 1})]") == ["f(x={'k': 1})"]
    with pytest.raises(DecodeError):
        decode_execute_prompt("[f(x={})]")
    assert decode_execute_fc([{"cd": '{"folder": "a"}'}, {"ls": {}}]) == ["cd(folder='a')", "ls()"]
    assert decode_execute_fc({"cd": '{"folder": "a"}'}) == ["cd(folder='a')"]
    assert decode_execute_fc("") == []
    for bad in ("text", [1], [{"f": "[1]"}], [{"f": "{x"}]):
        with pytest.raises(DecodeError):
            decode_execute_fc(bad)


def test_empty_output_rules():
    assert is_empty_output([]) and is_empty_output([{}]) and is_empty_output("x") and is_empty_output(None)
    assert is_empty_output({}) and not is_empty_output([{"f": {}}])
