"""A restricted, size-guarded stand-in for ACEBench's ``eval(ast.unparse(value))`` of argument values.

ACEBench's decoder evaluates an argument value that is a binary operation (``a=3*4``) with Python's
``eval``. We never ``eval`` model output; :func:`evaluate` computes the same value for expressions
built from literals and containers, unary/binary/boolean/comparison operators (short-circuiting like
Python), conditional expressions, subscripts and slices, f-strings, calls of pure builtins
(:data:`BUILTINS`) and calls of pure methods of str/bytes/list/tuple/dict values (:data:`METHODS`).

Refused with :class:`ExprError` (where upstream might compute a value): names (upstream resolves the
builtins and its module's globals), comprehensions, lambdas, attributes other than those method calls,
assignment expressions, and anything whose result or intermediate would exceed :data:`MAX_WEIGHT`
items, characters or int bits. Other errors (``TypeError``, ``ZeroDivisionError``, ...) propagate as
``eval`` raises them; callers treat every exception as a decoding failure, as upstream does.

>>> import ast
>>> evaluate(ast.parse("len('abc')+[1,2][0]*2", mode="eval").body)
5
>>> evaluate(ast.parse("'a'+f'{1+1:>3}'", mode="eval").body)
'a  2'
"""

from __future__ import annotations

import ast
import re
from typing import Any

from envs.pythonic import BINARY_OPS, COMPARE_OPS, UNARY_OPS

MAX_WEIGHT = 100_000
"""Most items (containers, counted through nesting), characters (strings) or bits (ints) a value
may have; also the largest width/precision accepted in a format."""
MAX_TOTAL = 1_000_000
"""Most weight the operations of one output may produce altogether (see :class:`Budget`)."""


class ExprError(ValueError):
    """An expression this evaluator refuses (not a Python error of the expression itself)."""


BUILTINS = {
    f.__name__: f
    for f in (
        abs,
        all,
        any,
        ascii,
        bin,
        bool,
        chr,
        dict,
        divmod,
        enumerate,
        float,
        format,
        frozenset,
        hex,
        int,
        len,
        list,
        max,
        min,
        oct,
        ord,
        pow,
        repr,
        reversed,
        round,
        set,
        sorted,
        str,
        sum,
        tuple,
        zip,
    )
}
_STR_METHODS = {
    "capitalize",
    "casefold",
    "count",
    "endswith",
    "find",
    "index",
    "isalnum",
    "isalpha",
    "isdecimal",
    "isdigit",
    "islower",
    "isnumeric",
    "isspace",
    "istitle",
    "isupper",
    "lower",
    "lstrip",
    "partition",
    "removeprefix",
    "removesuffix",
    "replace",
    "rfind",
    "rindex",
    "rpartition",
    "rsplit",
    "rstrip",
    "split",
    "splitlines",
    "startswith",
    "strip",
    "swapcase",
    "title",
    "upper",
    "join",
    "center",
    "ljust",
    "rjust",
    "zfill",
    "encode",
}
METHODS: dict[type, set[str]] = {
    str: _STR_METHODS,
    bytes: (_STR_METHODS - {"encode"}) | {"decode", "hex"},
    list: {"count", "index", "copy"},
    tuple: {"count", "index"},
    dict: {"get", "keys", "values", "items", "copy"},
    int: {"bit_length", "conjugate"},
    float: {"conjugate", "hex", "is_integer"},
}
_DIGITS = re.compile(r"\d+")


def _weigh(value: Any) -> int:
    """The weight of ``value``; refused past MAX_WEIGHT (shared sub-containers count each time)."""
    total, stack = 0, [value]
    while stack:
        x = stack.pop()
        if isinstance(x, (str, bytes)):
            total += len(x)
        elif isinstance(x, bool):
            total += 1
        elif isinstance(x, int):
            if x.bit_length() > MAX_WEIGHT:
                raise ExprError("int too large to evaluate")
            total += 1
        elif isinstance(x, dict):
            total += len(x)
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, (list, tuple, set, frozenset)):
            total += len(x)
            stack.extend(x)
        else:
            total += 1
        if total > MAX_WEIGHT:
            raise ExprError("value too large to evaluate")
    return total


def _guard_format(spec: Any) -> None:
    if isinstance(spec, (str, bytes)):
        text = spec.decode("latin-1") if isinstance(spec, bytes) else spec
        if any(int(d) > MAX_WEIGHT for d in _DIGITS.findall(text)):
            raise ExprError("format width too large to evaluate")


def _ints(v: Any) -> list[int]:
    if isinstance(v, int) and not isinstance(v, bool):
        return [v]
    if isinstance(v, (list, tuple)):
        return [i for x in v for i in _ints(x)]
    if isinstance(v, dict):
        return [i for x in v.values() for i in _ints(x)]
    return []


def _guard_binop(op: type, a: Any, b: Any) -> None:
    """Refuse an operation whose result would be past the limit, before computing it."""
    ints = isinstance(a, int) and isinstance(b, int)
    if op is ast.Pow and ints and b > 0 and max(a.bit_length(), 1) * b > MAX_WEIGHT:
        raise ExprError("power too large to evaluate")
    if op is ast.LShift and ints and a.bit_length() + b > MAX_WEIGHT:
        raise ExprError("shift too large to evaluate")
    if op is ast.Mult:
        for seq, k in ((a, b), (b, a)):
            if (
                isinstance(seq, (str, bytes, list, tuple))
                and isinstance(k, int)
                and len(seq) * max(k, 0) > MAX_WEIGHT
            ):
                raise ExprError("repetition too large to evaluate")
    if op is ast.Mod and isinstance(a, (str, bytes)):  # printf-style widths: in the format or via '*'
        _guard_format(a)
        if any(abs(i) > MAX_WEIGHT for i in _ints(b)):
            raise ExprError("format width too large to evaluate")


def _guard_call(name: str, obj: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    if name == "pow" and len(args) == 2 and not kwargs:
        _guard_binop(ast.Pow, args[0], args[1])
    if name == "round" and len(args) == 2 and isinstance(args[1], int) and abs(args[1]) > 4300:
        raise ExprError("round() precision too large to evaluate")
    if name == "format" and len(args) == 2:
        _guard_format(args[1])
    if (
        name in ("center", "ljust", "rjust", "zfill")
        and args
        and isinstance(args[0], int)
        and args[0] > MAX_WEIGHT
    ):
        raise ExprError("width too large to evaluate")
    if name == "replace" and len(args) >= 2 and isinstance(obj, (str, bytes)):
        old, new = args[0], args[1]
        hits = obj.count(old) if old else len(obj) + 1
        if isinstance(new, (str, bytes)) and len(obj) + hits * len(new) > MAX_WEIGHT:
            raise ExprError("replacement too large to evaluate")
    if name == "join" and args and isinstance(obj, (str, bytes)):
        items = args[0]
        if (
            isinstance(items, (list, tuple))
            and len(obj) * len(items) + sum(len(x) for x in items if isinstance(x, (str, bytes))) > MAX_WEIGHT
        ):
            raise ExprError("join too large to evaluate")


class Budget:
    """Total weight all operations of one decoded output may produce (bounds memory and time)."""

    __slots__ = ("left",)

    def __init__(self, total: int = MAX_TOTAL) -> None:
        self.left = total

    def charge(self, value: Any) -> Any:
        self.left -= _weigh(value)
        if self.left < 0:
            raise ExprError("expressions too large to evaluate")
        return value


class _Evaluator:
    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    def elements(self, nodes: list[ast.expr]) -> list[Any]:
        out: list[Any] = []
        for n in nodes:
            if isinstance(n, ast.Starred):
                out.extend(self.eval(n.value))
            else:
                out.append(self.eval(n))
        return out

    def call(self, node: ast.Call) -> Any:
        args = self.elements(node.args)
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self.eval(kw.value))
            else:
                kwargs[kw.arg] = self.eval(kw.value)
        if isinstance(node.func, ast.Name) and node.func.id in BUILTINS:
            _guard_call(node.func.id, None, args, kwargs)
            return self.budget.charge(BUILTINS[node.func.id](*args, **kwargs))
        if isinstance(node.func, ast.Attribute):
            obj = self.eval(node.func.value)
            name = node.func.attr
            if name in METHODS.get(type(obj), ()):
                _guard_call(name, obj, args, kwargs)
                return self.budget.charge(getattr(obj, name)(*args, **kwargs))
        raise ExprError(f"call not evaluated: {ast.unparse(node.func)[:80]}")

    def formatted(self, node: ast.FormattedValue) -> str:
        value = self.eval(node.value)
        if node.conversion == ord("s"):
            value = str(value)
        elif node.conversion == ord("r"):
            value = repr(value)
        elif node.conversion == ord("a"):
            value = ascii(value)
        spec = self.eval(node.format_spec) if node.format_spec is not None else ""
        _guard_format(spec)
        return self.budget.charge(format(value, spec))

    def eval(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.List):
            return self.elements(node.elts)
        if isinstance(node, ast.Tuple):
            return tuple(self.elements(node.elts))
        if isinstance(node, ast.Set):
            return set(self.elements(node.elts))
        if isinstance(node, ast.Dict):
            out: dict[Any, Any] = {}
            for k, v in zip(node.keys, node.values):
                if k is None:
                    out.update(self.eval(v))
                else:
                    key = self.eval(k)
                    out[key] = self.eval(v)
            return out
        if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY_OPS:
            return self.budget.charge(UNARY_OPS[type(node.op)](self.eval(node.operand)))
        if isinstance(node, ast.BinOp) and type(node.op) in BINARY_OPS:
            a, b = self.eval(node.left), self.eval(node.right)
            _guard_binop(type(node.op), a, b)
            return self.budget.charge(BINARY_OPS[type(node.op)](a, b))
        if isinstance(node, ast.BoolOp):
            result = None
            for v in node.values:  # short-circuit like Python
                result = self.eval(v)
                if (not result) if isinstance(node.op, ast.And) else result:
                    return result
            return result
        if isinstance(node, ast.Compare):
            left = self.eval(node.left)
            for op, comp in zip(node.ops, node.comparators):
                right = self.eval(comp)
                if not COMPARE_OPS[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return self.eval(node.body) if self.eval(node.test) else self.eval(node.orelse)
        if isinstance(node, ast.Subscript):
            return self.eval(node.value)[self.eval(node.slice)]
        if isinstance(node, ast.Slice):
            parts = (node.lower, node.upper, node.step)
            return slice(*(self.eval(p) if p is not None else None for p in parts))
        if isinstance(node, ast.JoinedStr):
            parts = [self.eval(v) if isinstance(v, ast.Constant) else self.formatted(v) for v in node.values]
            return self.budget.charge("".join(parts))
        if isinstance(node, ast.FormattedValue):
            return self.formatted(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Name):
            raise ExprError(f"name '{node.id}' is not evaluated")
        raise ExprError(f"expression not evaluated: {type(node).__name__}")


def evaluate(node: ast.AST, budget: Budget | None = None) -> Any:
    """The value Python's ``eval`` gives ``node``, within the supported subset and size limits.

    ``budget``: share one :class:`Budget` across all expressions of an output (a fresh one if None).
    """
    return _Evaluator(budget or Budget()).eval(node)
