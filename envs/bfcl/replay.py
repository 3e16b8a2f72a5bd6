"""Model outputs built from BFCL ground truth, in either result format (for tests and benchmarks).

Single-turn: every call of the possible answer, each parameter set to its *first* allowed value
(a first value of ``""`` means "omit it"); Java/JavaScript values are written as the source text the
official converters read back. Multi-turn: each turn's ground-truth calls as one step, with
positional arguments bound to keywords (the prompting decoder drops positional arguments).

>>> from envs.bfcl.data import Entry
>>> e = Entry("simple_0", "simple", [], [], [{"f": {"x": [3, 4], "y": ["", "a"]}}])
>>> ground_truth_output(e, "prompt"), ground_truth_output(e, "fc")
('[f(x=3)]', [{'f': '{"x": 3}'}])
"""

from __future__ import annotations

import ast
import inspect
import json
from typing import Any

from envs.bfcl.ast_checker import underscore_name
from envs.bfcl.data import Entry, is_multi_turn
from envs.bfcl.execution import api_class


def first_value(allowed: list[Any]) -> Any:
    """The first allowed value, with nested dict answers (and lists of them) resolved too."""
    v = allowed[0]
    if isinstance(v, dict):
        return _resolve_dict(v)
    if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
        return [_resolve_dict(x) for x in v]
    return v


def _resolve_dict(d: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, options in d.items():
        if isinstance(options, list) and options:
            if options[0] != "":
                out[k] = first_value(options)
        else:
            out[k] = options
    return out


def answer_calls(answer: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    calls = []
    for call in answer:
        name, params = next(iter(call.items()))
        calls.append((name, {p: first_value(a) for p, a in params.items() if a and a[0] != ""}))
    return calls


# ---- Java / JavaScript source text ------------------------------------------------------------


def _doc_props(entry: Entry, name: str) -> dict[str, Any]:
    for d in entry.functions:
        if d["name"] == name:
            return d["parameters"]["properties"]
    return {}


def java_source(value: Any, type_name: str, nested: str | None = None) -> str:
    if type_name == "boolean":
        return "true" if value else "false"
    if type_name == "long":
        return f"{value}L"
    if type_name == "float":
        return f"{value}f"
    if type_name in ("integer", "byte", "short", "double"):
        return str(value)
    if type_name == "HashMap" and isinstance(value, dict):
        puts = " ".join(f'put("{k}", {_scalar_source(v)});' for k, v in value.items())
        return f"new HashMap<String, Object>() {{{{ {puts} }}}}" if puts else "new HashMap<String, Object>()"
    if type_name == "ArrayList" and isinstance(value, list):
        parts = [
            f'"{v}"'
            if nested == "String"
            else f"'{v}'"
            if nested == "char"
            else java_source(v, nested)
            if nested
            else _scalar_source(v)
            for v in value
        ]
        return f"new ArrayList<>(Arrays.asList({', '.join(parts)}))" if parts else "new ArrayList<>()"
    if type_name == "Array" and isinstance(value, list):
        elem = {
            "integer": "int",
            "long": "long",
            "double": "double",
            "float": "float",
            "boolean": "boolean",
            "char": "char",
        }.get(nested or "", "String")
        parts = [java_source(v, nested) if nested else _scalar_source(v) for v in value]
        return f"new {elem}[]{{{', '.join(parts)}}}"
    return value if isinstance(value, str) else json.dumps(value)


def _scalar_source(v: Any) -> str:
    """A Java or JavaScript literal for a scalar: lower-case booleans, double-quoted strings."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return str(v)


def js_source(value: Any, type_name: str, nested: str | None = None) -> str:
    if type_name == "Boolean":
        return "true" if value else "false"
    if type_name in ("integer", "float"):
        return str(value)
    if type_name == "Bigint":
        return f"{value}n"
    if (type_name == "array" and isinstance(value, list)) or (
        type_name == "dict" and isinstance(value, dict)
    ):
        return _js_literal_source(value)
    return value if isinstance(value, str) else json.dumps(value)


def _js_literal_source(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_js_literal_source(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_js_literal_source(x)}" for k, x in v.items()) + "}"
    return _scalar_source(v)


def _typed_source(entry: Entry, name: str, args: dict[str, Any]) -> dict[str, str]:
    props = _doc_props(entry, name)
    render = java_source if entry.language == "Java" else js_source
    out = {}
    for k, v in args.items():
        spec = props.get(k, {})
        out[k] = render(v, spec.get("type", "String"), (spec.get("items") or {}).get("type"))
    return out


def _prompt_literal(text: str, language: str) -> str:
    """A prompting-format argument whose parsed text is ``text``."""
    if language == "Java":
        if '"' not in text and "\\" not in text and "\n" not in text:
            return f'"{text}"'
        return text  # raw Java source; tree-sitter hands back its token text
    if '"' not in text:
        return f'"{text}"'
    if "'" not in text:
        return f"'{text}'"
    return text


# ---- public -------------------------------------------------------------------------------------


def ground_truth_output(entry: Entry, fmt: str) -> Any:
    """A raw result (as a model would produce it) that replays the entry's ground truth."""
    if is_multi_turn(entry.category):
        return multi_turn_output(entry, fmt)
    calls = answer_calls(entry.answer)
    if entry.language in ("Java", "JavaScript"):
        calls = [(n, _typed_source(entry, n, a)) for n, a in calls]
    if fmt == "fc":
        return [{underscore_name(n): json.dumps(a)} for n, a in calls]
    if entry.language in ("Java", "JavaScript"):
        return (
            "["
            + ", ".join(
                f"{n}(" + ", ".join(f"{k}={_prompt_literal(v, entry.language)}" for k, v in a.items()) + ")"
                for n, a in calls
            )
            + "]"
        )
    return (
        "[" + ", ".join(f"{n}(" + ", ".join(f"{k}={v!r}" for k, v in a.items()) + ")" for n, a in calls) + "]"
    )


def keyword_call(call: str, involved_classes: list[str]) -> tuple[str, dict[str, Any]]:
    """Parse a ground-truth call string and bind positional arguments to parameter names."""
    node = ast.parse(call, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a simple call: {call}")  # noqa: TRY004 (a malformed string, not a wrong type)
    name = node.func.id
    args = [ast.literal_eval(a) for a in node.args]
    kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
    if args:
        for cls_name in reversed(involved_classes):  # the last class wins, as upstream's name map
            method = getattr(api_class(cls_name), name, None)
            if method is not None:
                bound = inspect.signature(method).bind(None, *args, **kwargs)
                kwargs = {k: v for k, v in bound.arguments.items() if k != "self"}
                break
    return name, kwargs


def multi_turn_output(entry: Entry, fmt: str) -> list[list[Any]]:
    turns: list[list[Any]] = []
    for gt_calls in entry.answer:
        if not gt_calls:
            turns.append([])
            continue
        calls = [keyword_call(c, entry.involved_classes) for c in gt_calls]
        if fmt == "fc":
            step: Any = [{n: json.dumps(a)} for n, a in calls]
        else:
            step = (
                "["
                + ", ".join(f"{n}(" + ", ".join(f"{k}={v!r}" for k, v in a.items()) + ")" for n, a in calls)
                + "]"
            )
        turns.append([step])
    return turns
