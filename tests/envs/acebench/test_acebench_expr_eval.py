"""The restricted stand-in for ACEBench's eval() of binary-operation argument values.

Upstream computes these values with Python's eval, so eval itself is the oracle for the supported
subset; the decoder cases were checked against the official evaluator in the same run
(benchmarks/acebench_official_agreement.py, synthetic entries).
"""

import ast

import pytest

from envs.acebench.decode import decode_prompt
from envs.acebench.expr_eval import MAX_TOTAL, Budget, ExprError, evaluate


def ev(src):
    return evaluate(ast.parse(src, mode="eval").body)


@pytest.mark.parametrize(
    "src",
    [
        "'a'+'bc'",
        "2*3+1",
        "7/2",
        "len('abc')+1",
        "abs(-2)*3",
        "'ab'+str('c')",
        "[1,2][0]+1",
        "(1 if True else 2)+1",
        "'a'+f'bc'",
        "'a'+f'{1+1:>3}'",
        "f'{\"x\"!r}'+''",
        "(1,)+(2,)",
        "{1}|{2}",
        "(1<2<3)+0",
        "(True and 3)+1",
        "(True or 1/0)+1",  # short-circuit, like Python
        "(0 and 1/0)+1",
        "'ABC'.lower()+''",
        "'-'.join(['a','b','c'])+''",
        "int('3')+1",
        "max([1,2])+min(3,4)",
        "round(2.567,1)*1",
        "'%s'%'abc'+''",
        "'cba'[::-1]+''",
        "{'a':1}['a']+1",
        "{'a':1}.get('b',0)+1",
        "True+True",
        "str(None)+'abc'",
        "f'{1:03d}'+'abc'",
        "max(*[1,2])+1",
        "dict(**{'a':1})|{'b':2}",
        "[*'ab']+[]",
        "{**{'a':1}}|{}",
        "(5).bit_length()+1",
        "2**2000-2**2000",
        "sorted([3,1,2])+list(reversed([1,2]))",
        "-(-5)+1",
        "not True",
    ],
)
def test_supported_expressions_match_eval(src):
    assert ev(src) == eval(src)  # noqa: S307 - constant test expressions: eval is the oracle


@pytest.mark.parametrize(
    "src, exc",
    [
        ("1/0", ZeroDivisionError),
        ("int('x')+1", ValueError),
        ("[1][5]+1", IndexError),
        ("{'a':1}['b']+1", KeyError),
        ("1@2", TypeError),
        ("'a'+1", TypeError),
    ],
)
def test_python_errors_propagate_like_eval(src, exc):
    with pytest.raises(exc):
        ev(src)


@pytest.mark.parametrize(
    "src",
    [
        "x+1",  # names (upstream resolves builtins and its module globals)
        "(lambda:1)()+1",
        "json.dumps('a')+''",
        "(y:=2)+1",
        "[c for c in 'ab']+[]",
        "open('f')",
        "__import__('os')",
        "'a'.format(1)",
        "(1).real+1",
    ],
)
def test_refused_expressions(src):
    with pytest.raises(ExprError):
        ev(src)


@pytest.mark.parametrize(
    "src",
    [
        "2**200000",
        "1<<10**9",
        "'x'*10**9",
        "'%099999999d'%1",  # printf width
        "'%*d'%(10**8,1)",  # width taken from the arguments
        "f'{1:>999999999}'+''",
        "format(1,'>999999999')+''",
        "('a'*50000).replace('','xy')",
        "'x'.join(['y'*1000]*1000)+''",
        "'a'.zfill(10**9)",
        "str([[0]*1000]*1000)+''",  # shared rows still count once per appearance
        "round(5,-10**9)",
        "pow(2,10**9)",
    ],
)
def test_size_guards_refuse_before_computing(src):
    with pytest.raises(ExprError):
        ev(src)


def test_budget_is_shared_by_all_expressions_of_an_output():
    big = "'x'*99999+''"
    assert len(ev(big)) == 99999
    n = MAX_TOTAL // 99999 + 1
    d = decode_prompt("[f(a=[" + ",".join([big] * n) + "])]")
    assert d.calls is None and "too large" in d.error
    budget = Budget(10)
    evaluate(ast.parse("'abcd'+''", mode="eval").body, budget)
    with pytest.raises(ExprError):
        evaluate(ast.parse("'abcdefgh'+''", mode="eval").body, budget)


@pytest.mark.parametrize(
    "text, calls",
    [
        ("[f(n=len('abc')+1)]", [{"f": {"n": 4}}]),
        ("[f(s='-'.join(['a','b'])+'')]", [{"f": {"s": "a-b"}}]),
        ("[f(n={'a': 1}['a']+1)]", [{"f": {"n": 2}}]),
        ("[f(n=(True or 1/0)+1)]", None),  # whitespace removal leaves the name "Trueor1"
        ("[f(s='a'+f'{1:03d}')]", [{"f": {"s": "a001"}}]),
        ("[f(n=[1, 2][0] + 1)]", [{"f": {"n": 2}}]),  # whitespace is removed first
        ("[f(n=str(1))]", [{"f": {"n": {"str": {}}}}]),  # a call outside a binary operation stays a call
    ],
)
def test_decoder_evaluates_binary_operations(text, calls):
    assert decode_prompt(text).calls == calls


@pytest.mark.parametrize("text", ["[f(n=(lambda:1)()+1)]", "[f(n=x+1)]", "[f(n=1/0)]", "[f(n=int('x')+1)]"])
def test_decoder_fails_where_evaluation_fails(text):
    d = decode_prompt(text)
    assert d.calls is None and d.error.startswith("Invalid syntax. Failed to decode AST.")
