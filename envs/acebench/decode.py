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
- Binary operations are evaluated (upstream calls ``eval``). We evaluate only literal operands
  (numbers, strings, containers) and refuse anything else or anything too large; upstream would
  also resolve names visible in its module, which we do not.
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
import operator
from dataclasses import dataclass
from typing import Any

MAX_DECODE_CHARS = 1_000_000
_MAX_SEQ = 100_000  # refuse building strings/lists/ints bigger than this (items or bits) in an operation


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


def _call_name(func: ast.AST) -> str:
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def _negate_operand(node: ast.UnaryOp) -> Any:
    operand = getattr(node.operand, "value", None)
    if not isinstance(node.operand, ast.Constant):
        # upstream computes -operand.value: an AST node (or a missing attribute) -> TypeError/AttributeError
        raise DecodeError(f"bad operand type for unary -: '{type(operand).__name__}'")
    try:
        return -operand
    except TypeError as e:
        raise DecodeError(str(e)) from None


_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitOr: operator.or_,
    ast.BitAnd: operator.and_,
    ast.BitXor: operator.xor,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}
_CMP = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


def _size(v: Any) -> int:
    if isinstance(v, bool):
        return 0
    if isinstance(v, int):
        return v.bit_length()
    if isinstance(v, (str, bytes, list, tuple)):
        return len(v)
    return 0


def _guard_binop(op: type, a: Any, b: Any) -> None:
    """Refuse only what would build a result past the size limit (upstream would just compute it)."""
    ints = isinstance(a, int) and isinstance(b, int)
    if op is ast.Pow and ints and b > 0 and max(a.bit_length(), 1) * b > _MAX_SEQ:
        raise DecodeError("power too large to evaluate")
    if op is ast.LShift and ints and a.bit_length() + b > _MAX_SEQ:
        raise DecodeError("shift too large to evaluate")
    if op is ast.Mult:
        for seq, k in ((a, b), (b, a)):
            if (
                isinstance(seq, (str, bytes, list, tuple))
                and isinstance(k, int)
                and len(seq) * max(k, 0) > _MAX_SEQ
            ):
                raise DecodeError("repetition too large to evaluate")


def _literal_eval(node: ast.AST) -> Any:
    """Evaluate an expression made only of literals and operators (our stand-in for eval)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_literal_eval(e) for e in node.elts]
        return (
            items
            if isinstance(node, ast.List)
            else tuple(items)
            if isinstance(node, ast.Tuple)
            else set(items)
        )
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise DecodeError("dict unpacking is not evaluated")
        return {_literal_eval(k): _literal_eval(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_literal_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a, b = _literal_eval(node.left), _literal_eval(node.right)
        _guard_binop(type(node.op), a, b)
        out = _BINOPS[type(node.op)](a, b)
        if _size(out) > _MAX_SEQ:
            raise DecodeError("result too large")
        return out
    if isinstance(node, ast.BoolOp):
        vals = [_literal_eval(v) for v in node.values]
        out = vals[0]
        for v in vals[1:]:
            out = (out and v) if isinstance(node.op, ast.And) else (out or v)
        return out
    if isinstance(node, ast.Compare):
        left = _literal_eval(node.left)
        for op, comp in zip(node.ops, node.comparators):
            right = _literal_eval(comp)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    raise DecodeError(f"name or expression not evaluated: {type(node).__name__}")


def _value(node: ast.AST, call_text: bool = False) -> Any:
    """One argument value. ``call_text``: a keyword-less nested call becomes its source text
    (the agent executor's variant) instead of ``{name: {}}`` (the evaluator's)."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        return _negate_operand(node)
    if isinstance(node, ast.List):
        return [_value(v, call_text) for v in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise DecodeError("Unsupported AST type: <class 'NoneType'>")
            key = _value(k, call_text)
            try:
                out[key] = _value(v, call_text)
            except TypeError as e:  # unhashable key
                raise DecodeError(str(e)) from None
        return out
    if isinstance(node, ast.BinOp):
        try:
            return _literal_eval(node)
        except (TypeError, ValueError, ZeroDivisionError, OverflowError, ArithmeticError) as e:
            raise DecodeError(f"{type(e).__name__}: {e}") from None
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        if call_text and not node.keywords:
            return ast.unparse(node)
        return resolve_call(node, call_text)
    if isinstance(node, ast.Tuple):
        return tuple(_value(v, call_text) for v in node.elts)
    if isinstance(node, ast.Lambda):
        raise DecodeError("'expr' object is not subscriptable")
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]"
    raise DecodeError(f"Unsupported AST type: {type(node)}")


def resolve_call(node: ast.Call, call_text: bool = False) -> dict[Any, Any]:
    """``{dotted.name: {keyword: value}}`` for one call node; positional arguments are dropped."""
    args: dict[Any, Any] = {}
    for kw in node.keywords:
        args[kw.arg] = _value(kw.value, call_text)
    return {_call_name(node.func): args}


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
        body = ast.parse(raw, mode="eval").body
        if not isinstance(body, (ast.List, ast.Tuple, ast.Set)):
            raise DecodeError(f"'{type(body).__name__}' object has no attribute 'elts'")
        calls = []
        for elem in body.elts:
            if not isinstance(elem, ast.Call):
                raise DecodeError("AssertionError")
            calls.append(resolve_call(elem))
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
