"""Decoding model output the way BFCL v3 (bfcl-eval 2025.8.6.2) does, quirks included.

Two result formats:

* **prompt**: a string such as ``"[f(a=1), g(b='x')]"``. Python is read with the ``ast`` module
  (``decode_ast_prompt``); Java and JavaScript with tree-sitter (``envs.bfcl.java_js``).
* **fc**: a list of ``{name: json-args-string}`` (OpenAI-style function calling), with dots in
  function names written as underscores.

Each decoder raises :class:`DecodeError` where BFCL's decoder raises (any exception there counts as
"failed to decode"). The quirks reproduced on purpose: surrounding backticks/newlines/spaces are
stripped, brackets added when missing, then every leading/trailing ``[``, ``]`` and ``'`` is stripped;
positional arguments are dropped; any unary operator negates a constant operand (``+5`` is -5);
a bare name becomes its identifier string; a nested call without keywords becomes its source text,
with keywords a nested ``{name: {args}}`` dict; ``a[1]`` becomes the string ``"a[1]"``; attributes,
sets, f-strings, comparisons and lambdas fail. Arithmetic (``ast.BinOp``), which BFCL hands to
``eval``, is evaluated here by a small safe evaluator over literals (see ``_safe_eval``).

>>> decode_ast_prompt("```[f(a=1, b=x)]```")
[{'f': {'a': 1, 'b': 'x'}}]
>>> decode_ast_fc([{"f_g": '{"a": 1}'}])
[{'f_g': {'a': 1}}]
"""

from __future__ import annotations

import ast
import json
import warnings
from typing import Any

from envs.bfcl.errors import DecodeError  # callers also import it from here
from envs.bfcl.java_js import parse_java_call, parse_js_call
from envs.pythonic import BINARY_OPS, COMPARE_OPS, UNARY_OPS, dotted_name

MAX_PROMPT_CHARS = 500_000


# ---- Python prompting format --------------------------------------------------------------------


def _prepare(text: str) -> str:
    s = text.strip("`\n ")
    if not s.startswith("["):
        s = "[" + s
    if not s.endswith("]"):
        s = s + "]"
    return s


def _call_dict(call: ast.Call) -> dict[str, Any]:
    args: dict[Any, Any] = {}
    for kw in call.keywords:  # positional arguments are ignored, as upstream
        args[kw.arg] = _value(kw.value)
    return {dotted_name(call.func): args}


def _value(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        # Upstream negates `operand.value` whatever the operator: only a numeric constant survives.
        operand = node.operand
        if (
            not isinstance(operand, ast.Constant)
            or isinstance(operand.value, (str, bytes))
            or operand.value is None
            or operand.value is Ellipsis
        ):
            raise DecodeError(f"unsupported unary operand: {ast.unparse(operand)[:80]}")
        return -operand.value
    if isinstance(node, ast.List):
        return [_value(v) for v in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise DecodeError("dict unpacking is not supported")
            key = _value(k)
            try:
                hash(key)
            except TypeError:
                raise DecodeError(f"unhashable dict key: {key!r}"[:200]) from None
            out[key] = _value(v)
        return out
    if isinstance(node, ast.BinOp):
        return _safe_eval(node)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return ast.unparse(node) if not node.keywords else _call_dict(node)
    if isinstance(node, ast.Tuple):
        return tuple(_value(v) for v in node.elts)
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]"
    raise DecodeError(f"unsupported AST type: {type(node).__name__}")


# Bounds that keep hostile arithmetic from hanging the checker (upstream would just run it).
_MAX_POW_EXP = 10_000
_MAX_SEQ = 1_000_000


def _size(v: Any) -> int:
    try:
        return len(v) if isinstance(v, (str, bytes, list, tuple, set, dict)) else 0
    except TypeError:
        return 0


def _safe_eval(node: ast.AST) -> Any:
    """Evaluate a literal expression with Python semantics (what upstream's ``eval`` gives for
    literal arithmetic). Names, calls and attributes are refused: a documented divergence, since
    upstream evaluates them in its own module namespace."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_safe_eval(e) for e in node.elts]
        if isinstance(node, ast.List):
            return items
        if isinstance(node, ast.Tuple):
            return tuple(items)
        try:
            return set(items)
        except TypeError as e:
            raise DecodeError(str(e)) from None
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise DecodeError("dict unpacking is not supported")
        try:
            return {_safe_eval(k): _safe_eval(v) for k, v in zip(node.keys, node.values)}
        except TypeError as e:
            raise DecodeError(str(e)) from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY_OPS:
        v = _safe_eval(node.operand)
        try:
            return UNARY_OPS[type(node.op)](v)
        except (TypeError, ValueError) as e:
            raise DecodeError(str(e)) from None
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY_OPS:
        return _safe_binop(type(node.op), _safe_eval(node.left), _safe_eval(node.right))
    if isinstance(node, ast.Compare):
        left = _safe_eval(node.left)
        for op, comp in zip(node.ops, node.comparators):
            right = _safe_eval(comp)
            try:
                if not COMPARE_OPS[type(op)](left, right):
                    return False
            except TypeError as e:
                raise DecodeError(str(e)) from None
            left = right
        return True
    if isinstance(node, ast.BoolOp):
        result: Any = None
        for v in node.values:
            result = _safe_eval(v)
            if isinstance(node.op, ast.And) and not result:
                return result
            if isinstance(node.op, ast.Or) and result:
                return result
        return result
    raise DecodeError(f"cannot evaluate {type(node).__name__} safely")


def _unsafe_binop(op: type, a: Any, b: Any) -> str | None:
    """Why ``a op b`` is too large to compute safely (a huge power, shift or repetition), else None.

    Also the guard of the multi-turn executor (``envs.bfcl.execution``).
    """
    if (
        op is ast.Pow
        and isinstance(b, int)
        and abs(b) > _MAX_POW_EXP
        and not (isinstance(a, (int, float)) and abs(a) <= 1)
    ):
        return "exponent too large to evaluate safely"
    if op is ast.LShift and isinstance(b, int) and b > 64 * _MAX_POW_EXP:
        return "shift too large to evaluate safely"
    if op is ast.Mult and (
        (isinstance(b, int) and _size(a) * abs(b) > _MAX_SEQ)
        or (isinstance(a, int) and _size(b) * abs(a) > _MAX_SEQ)
    ):
        return "sequence repetition too large to evaluate safely"
    return None


def _safe_binop(op: type, a: Any, b: Any) -> Any:
    """``a op b``, refusing results too large to compute safely."""
    unsafe = _unsafe_binop(op, a, b)
    if unsafe:
        raise DecodeError(unsafe)
    try:
        return BINARY_OPS[op](a, b)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, MemoryError) as e:
        raise DecodeError(f"{type(e).__name__}: {e}") from None


def decode_ast_prompt(text: Any, language: str = "Python") -> Any:
    """Decode a prompting-format result for AST checking (BFCL ``default_decode_ast_prompting``).

    Python returns a list of ``{name: {param: value}}``; Java/JavaScript return what BFCL's tree-sitter
    parsers return (a one-call list, or ``{}``/``None`` when no call is found).
    """
    if not isinstance(text, str):
        raise DecodeError(f"prompting result must be a string, got {type(text).__name__}")
    if len(text) > MAX_PROMPT_CHARS:
        raise DecodeError(f"result longer than {MAX_PROMPT_CHARS} characters")
    s = _prepare(text)
    if language == "Java":
        return parse_java_call(s[1:-1])
    if language == "JavaScript":
        return parse_js_call(s[1:-1])
    return _parse_python_calls(s)


def _parse_python_calls(s: str) -> list[dict[str, Any]]:
    calls, error = python_calls_or_error(s)
    if error is not None:
        raise DecodeError(
            f"{type(error).__name__}: {error}"[:300] if isinstance(error, BaseException) else error
        )
    return calls  # type: ignore[return-value]


def python_calls_or_error(s: str) -> tuple[list[dict[str, Any]] | None, Any]:
    """Like the Python prompt decoder (after bracket handling) but returns the error instead of
    raising it: the common no-call answer then costs no extra exception."""
    src = s.strip("[]'")
    if "(" not in src:  # no call can parse without a parenthesis: skip the parser for plain text
        return None, "no function call in the output"
    try:  # ast.parse(src, mode="eval") without its Python-level wrapper frame
        with warnings.catch_warnings():  # e.g. "invalid decimal literal" on model text
            warnings.simplefilter("ignore", SyntaxWarning)
            body = compile(src, "<unknown>", "eval", ast.PyCF_ONLY_AST).body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        return None, e  # formatted only if someone reads it
    try:
        if isinstance(body, ast.Call):
            return [_call_dict(body)], None
        if not isinstance(body, (ast.List, ast.Tuple, ast.Set)):
            return None, f"not a function call list: {type(body).__name__}"
        out = []
        for elem in body.elts:
            if not isinstance(elem, ast.Call):
                return None, f"not a function call: {type(elem).__name__}"
            out.append(_call_dict(elem))
        return out, None
    except DecodeError as e:
        return None, str(e)
    except RecursionError:
        return None, "output nested too deeply"


def try_decode_ast(result: Any, fmt: str, language: str = "Python") -> tuple[Any, Any]:
    """(decoded, None) or (None, reason): the AST decoders without exceptions on the common paths.
    The reason is a string or an exception (format it with ``str``)."""
    if fmt == "fc":
        if type(result) is str:  # a text answer: upstream iterates its characters and fails
            return ([], None) if result == "" else (None, "FC result is text, not a list of calls")
        try:
            return decode_ast_fc(result), None
        except DecodeError as e:
            return None, str(e)
        except RecursionError:
            return None, "output nested too deeply"
    if language == "Python" and type(result) is str and len(result) <= MAX_PROMPT_CHARS:
        return python_calls_or_error(_prepare(result))
    try:
        return decode_ast_prompt(result, language), None
    except DecodeError as e:
        return None, str(e)
    except RecursionError:
        return None, "output nested too deeply"
    except Exception as e:  # noqa: BLE001 (any decoder exception counts as a decode failure upstream)
        return None, f"{type(e).__name__}: {e}"[:300]


def decode_execute_prompt(text: Any) -> list[str]:
    """Decode a prompting-format step into executable call strings (BFCL
    ``default_decode_execute_prompting``): nested dict-of-dicts arguments render as calls."""
    calls = decode_ast_prompt(text, "Python")
    out = []
    for call in calls:
        for name, args in call.items():
            out.append(f"{name}(" + ", ".join(f"{k}={_nested_source(v)}" for k, v in args.items()) + ")")
    return out


def _nested_source(value: Any) -> str:
    if isinstance(value, dict):
        if all(isinstance(v, dict) for v in value.values()):
            if not value:
                raise DecodeError("empty dict argument cannot be rendered (upstream IndexError)")
            name = next(iter(value))
            return f"{name}(" + ", ".join(f"{k}={_nested_source(v)}" for k, v in value[name].items()) + ")"
        return "{" + ", ".join(f"'{k}': {_nested_source(v)}" for k, v in value.items()) + "}"
    return repr(value)


# ---- FC format ----------------------------------------------------------------------------------


def decode_ast_fc(result: Any) -> list[Any]:
    """Decode an FC result ``[{name: json-args}]`` for AST checking (OpenAI-style handler): the
    first key of each item is the name and its value is ``json.loads``-ed."""
    if isinstance(result, (str, bytes, dict, list, tuple, set)):
        items = list(result)
    else:
        raise DecodeError(f"FC result must be a list of {{name: arguments}}, got {type(result).__name__}")
    out = []
    for item in items:
        if not isinstance(item, dict):
            raise DecodeError(f"FC call must be an object, got {type(item).__name__}")
        if not item:
            raise DecodeError("FC call object is empty")
        name = next(iter(item))
        raw = item[name]
        if not isinstance(raw, (str, bytes, bytearray)):
            raise DecodeError(f"arguments of {name!r} must be a JSON string, got {type(raw).__name__}")
        try:
            out.append({name: json.loads(raw)})
        except (ValueError, RecursionError) as e:
            raise DecodeError(f"arguments of {name!r} are not valid JSON ({e})"[:300]) from None
    return out


def decode_execute_fc(result: Any) -> list[str]:
    """Decode an FC step into call strings (BFCL ``convert_to_function_call``): every key of each
    item is a call; string arguments are ``json.loads``-ed, dict arguments used as they are."""
    if isinstance(result, dict):
        result = [result]
    if not isinstance(result, (list, tuple, str)):
        raise DecodeError(f"FC step must be a list of {{name: arguments}}, got {type(result).__name__}")
    out = []
    for call in result:
        if not isinstance(call, dict):
            raise DecodeError(f"FC call must be an object, got {type(call).__name__}")
        for name, args in call.items():
            if isinstance(args, (str, bytes, bytearray)):
                try:
                    args = json.loads(args)
                except (ValueError, RecursionError) as e:
                    raise DecodeError(f"arguments of {name!r} are not valid JSON ({e})"[:300]) from None
            if not isinstance(args, dict):
                raise DecodeError(f"arguments of {name!r} must be an object")
            out.append(f"{name}(" + ",".join(f"{k}={v!r}" for k, v in args.items()) + ")")
    return out


# ---- shape checks (bfcl_eval.utils) -------------------------------------------------------------


def is_function_calling_format(decoded: Any) -> bool:
    """A list of one-key dicts whose value is a dict; ``[]`` counts."""
    if type(decoded) is not list:
        return False
    for item in decoded:
        if type(item) is not dict or len(item) != 1 or type(next(iter(item.values()))) is not dict:
            return False
    return True


def is_empty_output(decoded: Any) -> bool:
    """No real call: not in function-calling format, ``[]`` or ``[{}]``."""
    if not is_function_calling_format(decoded):
        return True
    return len(decoded) == 0 or (len(decoded) == 1 and len(decoded[0]) == 0)


def is_empty_execute(calls: list[Any]) -> bool:
    return len(calls) == 0 or (len(calls) == 1 and len(calls[0]) == 0)
