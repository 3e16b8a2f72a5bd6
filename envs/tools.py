"""``@tool``: typed, docstringed Python functions become OpenAI tool schemas and safe executors.

>>> @tool
... def add(a: int, b: int = 0) -> int:
...     '''Add two integers.
...
...     Args:
...         a: The first addend.
...         b: The second addend.
...     '''
...     return a + b
>>> add.schema["function"]["parameters"]["required"]
['a']
>>> ToolSet([add]).call("add", {"a": 2, "b": "x"}).content
"Error: argument 'b' of add must be an integer, got str"

Methods work too: decorate them in a class and ``ToolSet.from_object(instance)`` binds them.
Execution never raises: unknown tools, bad arguments and exceptions come back as
:class:`ToolResult` errors that an env shows to the model.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object",
               list: "array", tuple: "array", type(None): "null"}


def _annotation_schema(tp: Any) -> dict[str, Any]:
    if tp is inspect.Parameter.empty or tp is Any:
        return {}
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:  # Annotated[int, "description"]
        schema = _annotation_schema(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        return {**schema, "description": notes[0]} if notes else schema
    if origin is Literal:
        return {"type": _JSON_TYPES.get(type(args[0]), "string"), "enum": list(args)}
    if origin in (Union, types.UnionType):
        non_null = [a for a in args if a is not type(None)]
        if len(non_null) == 1:
            return _annotation_schema(non_null[0])
        return {"anyOf": [_annotation_schema(a) for a in non_null]}
    if origin in (list, tuple, set, frozenset) or tp in (list, tuple):
        item = _annotation_schema(args[0]) if args and args[0] is not Ellipsis else {}
        return {"type": "array", **({"items": item} if item else {})}
    if origin is dict or tp is dict:
        return {"type": "object"}
    if tp in _JSON_TYPES:
        return {"type": _JSON_TYPES[tp]}
    return {}


_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_SECTION = re.compile(r"^\s*(Returns|Return|Raises|Yields|Examples?|Notes?):\s*$")
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Google-style docstring -> (description, {param: description})."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    desc, params, current, mode = [], {}, None, "desc"
    for line in lines:
        if _ARGS_HEADER.match(line):
            mode = "args"
            continue
        if _SECTION.match(line):
            mode = "other"
            continue
        if mode == "desc":
            desc.append(line)
        elif mode == "args":
            m = _ARG_LINE.match(line)
            indent = len(line) - len(line.lstrip())
            if m and indent <= 4:
                current = m.group(1).lstrip("*")
                params[current] = m.group(3).strip()
            elif current and line.strip():
                params[current] = (params[current] + " " + line.strip()).strip()
    return "\n".join(desc).strip(), params


def function_schema(fn: Callable[..., Any], name: str | None = None) -> dict[str, Any]:
    """Build the OpenAI tool schema of a typed, docstringed function (``self`` is skipped)."""
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # unresolvable forward refs: fall back to raw annotations
        hints = {}
    desc, pdocs = parse_docstring(fn.__doc__)
    props: dict[str, Any] = {}
    required = []
    for pname, p in sig.parameters.items():
        if pname in ("self", "cls") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        prop = _annotation_schema(hints.get(pname, p.annotation))
        if pname in pdocs and "description" not in prop:
            prop["description"] = pdocs[pname]
        if p.default is p.empty:
            required.append(pname)
        elif p.default is not None and isinstance(p.default, (str, int, float, bool)):
            prop["default"] = p.default
        props[pname] = prop
    params = {"type": "object", "properties": props, "required": required}
    return {"type": "function",
            "function": {"name": name or fn.__name__, "description": desc, "parameters": params}}


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None) -> Any:
    """Mark a function or method as a tool and attach its OpenAI schema as ``.schema``."""

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        _check_documented(f, name or f.__name__)
        f.schema = function_schema(f, name)  # type: ignore[attr-defined]
        f.__tool_name__ = name or f.__name__  # type: ignore[attr-defined]
        return f

    return mark(fn) if fn is not None else mark


def _check_documented(fn: Callable[..., Any], name: str) -> None:
    """A tool the model sees must say what it does and what each argument is: without a docstring its
    description is empty, without an annotation an argument's schema is ``{}`` (anything goes)."""
    if not parse_docstring(fn.__doc__)[0]:
        raise TypeError(f"@tool {name}: no docstring; its first lines are the description the model sees")
    untyped = [p.name for p in inspect.signature(fn).parameters.values()
               if p.name not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               and p.annotation is p.empty]
    if untyped:
        raise TypeError(f"@tool {name}: parameter(s) {', '.join(untyped)} have no type annotation; "
                        "annotate them (e.g. `city: str`) so the schema says what to pass")


@dataclass(frozen=True)
class ToolResult:
    """What one call returned. ``error`` is set when it failed; ``content`` is shown either way."""

    name: str
    content: str
    error: str | None = None
    value: Any = None


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}
_ARTICLE = {"integer": "an integer", "object": "an object", "array": "an array"}


def check_value(value: Any, schema: dict[str, Any], where: str) -> str | None:
    """Check a JSON value against a small JSON-schema subset; return an error or None."""
    if "anyOf" in schema:
        if all(check_value(value, s, where) for s in schema["anyOf"]):
            return f"{where} matches none of the allowed types"
        return None
    t = schema.get("type")
    types_ = t if isinstance(t, list) else [t] if t else []
    if types_ and not any(_TYPE_CHECKS.get(x, lambda v: True)(value) for x in types_):
        want = " or ".join(_ARTICLE.get(x, f"a {x}") for x in types_)
        return f"{where} must be {want}, got {type(value).__name__}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where} must be one of {schema['enum']}, got {value!r}"
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            if err := check_value(v, schema["items"], f"{where}[{i}]"):
                return err
    return None


def check_arguments(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """Validate call arguments against a tool schema: names, required params and types."""
    fn = schema.get("function", schema)
    params = fn.get("parameters") or {}
    props = params.get("properties") or {}
    name = fn.get("name", "?")
    unknown = [k for k in arguments if k not in props]
    if unknown:
        return f"unknown argument(s) for {name}: {', '.join(map(str, unknown))}; expected {sorted(props)}"
    required = params.get("required", [])
    missing = [k for k in required if k not in arguments]
    if missing:
        return f"missing required argument(s) for {name}: {', '.join(missing)}"
    for k, v in arguments.items():
        if v is None and k not in required:  # an explicit null for an optional param means "default"
            continue
        if err := check_value(v, props[k], f"argument '{k}' of {name}"):
            return err
    return None


def format_result(value: Any) -> str:
    """Tool return value -> observation text (strings as is, the rest as JSON)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


class ToolSet:
    """Named, schema-checked callables. ``call`` never raises."""

    def __init__(self, tools: Iterable[Callable[..., Any]] = (), *, validate: bool = True,
                 max_result_chars: int = 20_000):
        self._fns: dict[str, Callable[..., Any]] = {}
        self._schemas: dict[str, dict[str, Any]] = {}
        self.validate = validate
        self.max_result_chars = max_result_chars
        for fn in tools:
            self.add(fn)

    @classmethod
    def from_object(cls, obj: object, **kw: Any) -> ToolSet:
        """Collect the ``@tool`` methods of ``obj`` (bound, so they see its state)."""
        fns = [getattr(obj, n) for n in dir(type(obj)) if hasattr(getattr(type(obj), n, None), "schema")]
        return cls(fns, **kw)

    def add(self, fn: Callable[..., Any], schema: dict[str, Any] | None = None) -> None:
        schema = schema or getattr(fn, "schema", None) or function_schema(fn)
        name = schema.get("function", schema)["name"]
        self._fns[name], self._schemas[name] = fn, schema

    @property
    def schemas(self) -> list[dict[str, Any]]:
        return list(self._schemas.values())

    @property
    def names(self) -> list[str]:
        return list(self._fns)

    def __contains__(self, name: object) -> bool:
        return name in self._fns

    def call(self, name: str | None, arguments: dict[str, Any] | None) -> ToolResult:
        if name not in self._fns:
            return ToolResult(str(name), f"Error: unknown tool '{name}'. Available tools: {', '.join(self._fns)}",
                              error="unknown_tool")
        args = arguments or {}
        if self.validate and (err := check_arguments(self._schemas[name], args)):
            return ToolResult(name, f"Error: {err}", error="bad_arguments")
        try:
            value = self._fns[name](**args)
        except Exception as e:  # the tool's own failure is an observation, not a crash
            return ToolResult(name, f"Error: {name} raised {type(e).__name__}: {e}"[:2000], error="tool_raised")
        text = format_result(value)
        if len(text) > self.max_result_chars:
            text = text[: self.max_result_chars] + f"... [truncated {len(text) - self.max_result_chars} chars]"
        return ToolResult(name, text, value=value)
