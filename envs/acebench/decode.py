"""ACEBench's decoding of model outputs, reproduced with its quirks (never raises).

Prompt format (normal categories). ACEBench first removes ALL whitespace from the raw output
(``"".join(text.split())``, so ``'New York'`` becomes ``'NewYork'``), then parses it with
:mod:`ast` and walks ``body.elts``. Quirks kept on purpose:

- No brackets are added: a bare ``f(a=1)`` has no ``elts`` and fails to decode; ``(f(a=1),)``
  and ``{f(a=1)}`` decode because tuples and sets have ``elts``.
- Positional arguments are silently dropped; ``**kw`` becomes a parameter named ``None``.
- Any unary operator on a constant negates it (``+5`` -> ``-5``, ``not True`` -> ``-1``).
- A bare name is read as its identifier string; ``a[1]`` as the text ``"a[1]"``.
- A nested call is read as ``{name: {kwargs}}`` (``{name: {}}`` without keywords).
- Binary operations are evaluated (upstream calls ``eval``). We never ``eval``:
  :mod:`envs.acebench.expr_eval` computes the same value for literals, operators, conditionals,
  subscripts, f-strings and pure builtin/method calls, and refuses names, comprehensions, lambdas
  and anything too large (upstream would compute those).
- Sets, f-strings, attribute values, comparisons and lambdas fail to decode.

FC format: a list of ``{name: arguments}`` where arguments is a JSON string (as ACEBench's FC
branch expects) or already an object.

>>> decode_prompt("[get_weather(city='New York', days=3)]").calls
[{'get_weather': {'city': 'NewYork', 'days': 3}}]
>>> decode_prompt("get_weather(city='Paris')").error[:22]
'Invalid syntax. Failed'
"""

from __future__ import annotations

import ast
import json
import math
import re
import warnings
from dataclasses import dataclass
from typing import Any

from envs.acebench.expr_eval import Budget, evaluate
from envs.pythonic import dotted_name

MAX_DECODE_CHARS = 1_000_000


class DecodeError(ValueError):
    """The output could not be decoded the way ACEBench decodes it."""


@dataclass(frozen=True)
class Decoded:
    """A decoded output: ``calls`` is a list of ``{name: {param: value}}`` or ``error`` is set."""

    calls: list[dict[Any, Any]] | None
    error: str | None = None
    raw: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


# ---- the normal-eval decoder (model_inference.utils.decode_ast) -------------------------------


_SOURCE_NAME = "<acebench-output>"
# Model text often triggers SyntaxWarnings ("invalid decimal literal"): silence them for our own
# parses only (a filter on this source name costs nothing per call, unlike catch_warnings).
warnings.filterwarnings("ignore", category=SyntaxWarning, module=re.escape(_SOURCE_NAME))


def parse_expression(text: str) -> ast.expr:
    """``ast.parse(text, mode="eval").body``, with SyntaxErrors worded as ast.parse words them."""
    try:
        return compile(text, _SOURCE_NAME, "eval", ast.PyCF_ONLY_AST).body
    except SyntaxError as e:
        e.filename = "<unknown>"  # upstream's messages name ast.parse's default source
        raise


def _negate_operand(node: ast.UnaryOp) -> Any:
    operand = getattr(node.operand, "value", None)
    if not isinstance(node.operand, ast.Constant):
        # upstream computes -operand.value: an AST node (or a missing attribute) -> TypeError/AttributeError
        raise DecodeError(f"bad operand type for unary -: '{type(operand).__name__}'")
    try:
        return -operand
    except TypeError as e:
        raise DecodeError(str(e)) from None


def _value(node: ast.AST, call_text: bool = False, budget: Budget | None = None) -> Any:
    """One argument value. ``call_text``: a keyword-less nested call becomes its source text
    (the agent executor's variant) instead of ``{name: {}}`` (the evaluator's). ``budget``: shared
    by all evaluated expressions of one output."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        return _negate_operand(node)
    if isinstance(node, ast.List):
        return [_value(v, call_text, budget) for v in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise DecodeError("Unsupported AST type: <class 'NoneType'>")
            key = _value(k, call_text, budget)
            try:
                out[key] = _value(v, call_text, budget)
            except TypeError as e:  # unhashable key
                raise DecodeError(str(e)) from None
        return out
    if isinstance(node, ast.BinOp):
        try:
            return evaluate(node, budget)
        except Exception as e:  # upstream's eval: any error fails the decoding
            raise DecodeError(f"{type(e).__name__}: {e}") from None
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        if call_text and not node.keywords:
            return ast.unparse(node)
        return resolve_call(node, call_text, budget)
    if isinstance(node, ast.Tuple):
        return tuple(_value(v, call_text, budget) for v in node.elts)
    if isinstance(node, ast.Lambda):
        raise DecodeError("'expr' object is not subscriptable")
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]"
    raise DecodeError(f"Unsupported AST type: {type(node)}")


def resolve_call(node: ast.Call, call_text: bool = False, budget: Budget | None = None) -> dict[Any, Any]:
    """``{dotted.name: {keyword: value}}`` for one call node; positional arguments are dropped."""
    budget = budget or Budget()
    args: dict[Any, Any] = {}
    for kw in node.keywords:
        args[kw.arg] = _value(kw.value, call_text, budget)
    return {dotted_name(node.func): args}


def remove_whitespace(text: str) -> str:
    """ACEBench's first step on a prompt-format output: drop every whitespace character."""
    return "".join(text.split())


def decode_prompt(text: Any) -> Decoded:
    """Decode a prompt-format output exactly as ACEBench's normal evaluator does."""
    if not isinstance(text, str):
        return Decoded(
            None,
            f"Invalid syntax. Failed to decode AST. '{type(text).__name__}' object has no attribute 'split'",
            repr(text)[:200],
        )
    raw = remove_whitespace(text)
    if len(raw) > MAX_DECODE_CHARS:
        return Decoded(
            None, f"Invalid syntax. Failed to decode AST. output longer than {MAX_DECODE_CHARS}", raw[:200]
        )
    try:
        body = parse_expression(raw)
        if not isinstance(body, (ast.List, ast.Tuple, ast.Set)):
            raise DecodeError(f"'{type(body).__name__}' object has no attribute 'elts'")
        calls = []
        budget = Budget()
        for elem in body.elts:
            if not isinstance(elem, ast.Call):
                raise DecodeError("AssertionError")
            calls.append(resolve_call(elem, budget=budget))
    except (SyntaxError, ValueError, RecursionError, MemoryError, TypeError) as e:
        return Decoded(None, f"Invalid syntax. Failed to decode AST. {e}"[:500], raw)
    return Decoded(calls, None, raw)


def decode_fc(result: Any) -> Decoded:
    """Decode an FC-format output: a list of ``{name: json-arguments}`` (ACEBench's FC branch).

    Arguments may also already be objects. Anything else is a decode error.
    """
    if isinstance(result, str):
        try:
            result = json.loads(result)
        except (json.JSONDecodeError, RecursionError) as e:
            return Decoded(None, f"Invalid syntax. Failed to decode FC output. {e}"[:500], result[:200])
    if not isinstance(result, list):
        return Decoded(None, f"Invalid syntax. FC output must be a list, got {type(result).__name__}")
    calls = []
    for item in result:
        if not isinstance(item, dict) or not item:
            return Decoded(None, "Invalid syntax. Each FC call must be a non-empty object {name: arguments}")
        name = next(iter(item))
        args = item[name]
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except (json.JSONDecodeError, RecursionError) as e:
                return Decoded(None, f"Invalid syntax. Failed to decode FC arguments of {name}. {e}"[:500])
        calls.append({name: args})
    return Decoded(calls)


def is_call_list(decoded: Any) -> bool:
    """ACEBench's is_function_call_format_valid: a list whose items are all dicts."""
    return isinstance(decoded, list) and all(isinstance(d, dict) for d in decoded)


def contains_nonfinite(v: Any) -> bool:
    """True when a float inf/nan hides in ``v`` (its repr would not evaluate back upstream)."""
    if isinstance(v, float):
        return not math.isfinite(v)
    if isinstance(v, complex):
        return not (math.isfinite(v.real) and math.isfinite(v.imag))
    if isinstance(v, (list, tuple, set)):
        return any(contains_nonfinite(x) for x in v)
    if isinstance(v, dict):
        return any(contains_nonfinite(k) or contains_nonfinite(x) for k, x in v.items())
    return False
