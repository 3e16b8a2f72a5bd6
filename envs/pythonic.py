"""The BFCL/ACEBench prompting format: ``[f(a=1), g(b='x')]``, parsed with the ast module.

>>> [(c.name, c.arguments) for c in parse_pythonic_calls("[f(a=1), pkg.g(b='x', c=[1, -2.5])]").calls]
[('f', {'a': 1}), ('pkg.g', {'b': 'x', 'c': [1, -2.5]})]

Decoding follows BFCL's prompting handler: strip whitespace and code fences, add brackets when
missing, then read each call's keyword arguments as Python literals. Benchmarks with quirks of
their own (ACEBench removes all whitespace first) call :func:`parse_pythonic_calls` after their
own preprocessing. Never raises on model output.
"""

from __future__ import annotations

import ast
import operator
from typing import Any

from envs.protocol import ParsedResponse, ToolCall

MAX_SOURCE_CHARS = 200_000


BINARY_OPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.LShift: operator.lshift,
    ast.RShift: operator.rshift, ast.BitOr: operator.or_, ast.BitAnd: operator.and_, ast.BitXor: operator.xor,
    ast.MatMult: operator.matmul,
}
"""Python's binary operators by AST node type (the checkers' evaluators apply their own limits first)."""
UNARY_OPS = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}
"""Python's unary operators by AST node type."""
COMPARE_OPS = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
"""Python's comparison operators by AST node type."""


def dotted_name(node: ast.AST) -> str:
    """``a.b.c`` of a chain of attributes on a name (the part that is a name or attribute, otherwise)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


class _Unsupported(ValueError):
    pass


def _value(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _value(node.operand)
        if not isinstance(v, (int, float, complex)) or isinstance(v, bool):
            raise _Unsupported("unary sign on a non-number")
        return -v if isinstance(node.op, ast.USub) else +v
    if isinstance(node, ast.List):
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(e) for e in node.elts)
    if isinstance(node, ast.Set):
        return {_value(e) for e in node.elts}
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise _Unsupported("dict unpacking is not a literal")
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Name):  # BFCL reads bare names as their identifier string
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_value(node.value)}.{node.attr}"
    if isinstance(node, ast.BinOp):  # e.g. 3*4 or 1e3+2: BFCL evaluates simple arithmetic
        return _eval_arith(node)
    if isinstance(node, ast.Call):  # a nested call is kept as its source text
        return ast.unparse(node)
    raise _Unsupported(f"unsupported argument syntax: {type(node).__name__}")


def _eval_arith(node: ast.AST) -> Any:
    if isinstance(node, ast.BinOp):
        a, b = _eval_arith(node.left), _eval_arith(node.right)
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
               ast.Div: lambda: a / b}
        fn = ops.get(type(node.op))
        if fn is None or not all(isinstance(x, (int, float)) for x in (a, b)):
            raise _Unsupported("only + - * / on numbers are evaluated")
        try:
            return fn()
        except ZeroDivisionError:
            raise _Unsupported("division by zero") from None
    return _value(node)


def _func_name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_func_name(node.value)}.{node.attr}"
    raise _Unsupported(f"call target is not a name: {ast.unparse(node)}")


def strip_fences(text: str) -> str:
    """Drop surrounding whitespace and Markdown code fences (```python ... ```)."""
    s = text.strip()
    if s.startswith("```"):
        s = s[3:]
        if s.startswith("python"):
            s = s[len("python"):]
        s = s.strip()
    if s.endswith("```"):
        s = s[:-3]
    return s.strip().strip("`").strip()


def parse_pythonic_calls(text: str) -> ParsedResponse:
    """Parse ``[f(a=1), g(b='x')]`` (brackets optional) into calls. Never raises.

    Any defect makes the whole response undecodable (``error`` set, no calls), which is how
    BFCL treats a decode failure.
    """
    if not isinstance(text, str):
        return ParsedResponse("", None, (), f"response must be a string, got {type(text).__name__}")
    src = strip_fences(text)
    if len(src) > MAX_SOURCE_CHARS:
        return ParsedResponse(text, None, (), f"response longer than {MAX_SOURCE_CHARS} characters")
    if not src.startswith("["):
        src = f"[{src}"
    if not src.endswith("]"):
        src = f"{src}]"
    try:
        tree = ast.parse(src, mode="eval")
        body = tree.body
        elts = body.elts if isinstance(body, (ast.List, ast.Tuple)) else [body]
        calls = []
        for e in elts:
            if not isinstance(e, ast.Call):
                raise _Unsupported(f"not a function call: {ast.unparse(e)[:80]}")
            if e.args:
                raise _Unsupported(f"positional arguments in call to {_func_name(e.func)}")
            args = {}
            for kw in e.keywords:
                if kw.arg is None:
                    raise _Unsupported("**kwargs is not allowed")
                args[kw.arg] = _value(kw.value)
            calls.append(ToolCall(_func_name(e.func), args, ast.unparse(e)))
    except (SyntaxError, ValueError, RecursionError, MemoryError, TypeError) as ex:
        return ParsedResponse(text, None, (), f"cannot decode calls: {type(ex).__name__}: {ex}"[:500])
    return ParsedResponse("", None, tuple(calls), None)


def _lit(v: Any) -> str:
    return repr(v)


def render_pythonic_calls(calls: list[tuple[str, dict[str, Any]]]) -> str:
    """Render calls back into ``[f(a=1), g(b='x')]``."""
    return "[" + ", ".join(f"{n}(" + ", ".join(f"{k}={_lit(v)}" for k, v in a.items()) + ")"
                           for n, a in calls) + "]"
