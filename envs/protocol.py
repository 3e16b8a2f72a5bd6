"""The Qwen3/Hermes tool-call protocol: parse model text, render calls, tools and tool responses.

A Qwen3 model answers with optional reasoning and any number of calls::

    <think>I should look the user up first.</think>
    <tool_call>
    {"name": "get_user", "arguments": {"user_id": 7}}
    </tool_call>

Parsing never raises on model output: every defect becomes a structured error on the
response or on the call, so an environment can answer with an error observation.

>>> r = parse_tool_calls('<tool_call>\\n{"name": "f", "arguments": "{\\\\"x\\\\": 1}"}\\n</tool_call>')
>>> r.calls[0].name, r.calls[0].arguments, r.calls[0].error
('f', {'x': 1}, None)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
TOOL_RESPONSE_OPEN = "<tool_response>"
TOOL_RESPONSE_CLOSE = "</tool_response>"

# Deeply nested JSON makes json.loads recurse; bound it so a hostile response cannot crash us.
MAX_JSON_DEPTH = 64

_TAG = re.compile(r"<tool_call>|</tool_call>")


@dataclass(frozen=True)
class ToolCall:
    """One parsed call. ``error`` is set (and name/arguments may be None) when it did not parse."""

    name: str | None
    arguments: dict[str, Any] | None
    raw: str
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class ParsedResponse:
    """A model response split into reasoning, visible content and tool calls.

    ``error`` describes a response-level defect (an unclosed tag); per-call defects live on the calls.
    """

    content: str
    reasoning: str | None
    calls: tuple[ToolCall, ...] = field(default_factory=tuple)
    error: str | None = None

    @property
    def errors(self) -> list[str]:
        errs = [self.error] if self.error else []
        return errs + [c.error for c in self.calls if c.error]


def _json_depth_ok(text: str) -> bool:
    depth = worst = 0
    in_str = escaped = False
    for ch in text:
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            worst = max(worst, depth)
            if worst > MAX_JSON_DEPTH:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def loads_bounded(text: str) -> Any:
    """json.loads with a nesting bound; raises ValueError on any defect."""
    if not _json_depth_ok(text):
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"invalid JSON: {e}") from None


def parse_call_json(body: str) -> ToolCall:
    """Parse the JSON body of one <tool_call> block into a ToolCall (never raises)."""
    raw = body
    body = body.strip()
    try:
        obj = loads_bounded(body)
    except ValueError as e:
        return ToolCall(None, None, raw, f"tool call is not valid JSON ({e})")
    if not isinstance(obj, dict):
        return ToolCall(None, None, raw, f"tool call must be a JSON object, got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return ToolCall(None, None, raw, "tool call has no 'name' string")
    args: Any = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # some models emit arguments as a JSON string
        try:
            args = loads_bounded(args) if args.strip() else {}
        except ValueError as e:
            return ToolCall(name, None, raw, f"arguments of '{name}' are not valid JSON ({e})")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return ToolCall(name, None, raw, f"arguments of '{name}' must be an object, got {type(args).__name__}")
    return ToolCall(name, args, raw)


def split_reasoning(text: str) -> tuple[str | None, str]:
    """Split '<think>...</think>rest' into (reasoning, rest). A lone '</think>' (the template
    opened the block) also counts; an unclosed '<think>' leaves the text untouched."""
    close = text.find(THINK_CLOSE)
    if close == -1:
        return None, text
    open_ = text.find(THINK_OPEN, 0, close)
    start = open_ + len(THINK_OPEN) if open_ != -1 else 0
    return text[start:close].strip(), text[close + len(THINK_CLOSE):]


def parse_tool_calls(text: str) -> ParsedResponse:
    """Parse a Qwen3/Hermes response into reasoning, content and tool calls. Never raises."""
    if not isinstance(text, str):
        return ParsedResponse("", None, (), f"response must be a string, got {type(text).__name__}")
    reasoning, rest = split_reasoning(text)
    calls: list[ToolCall] = []
    content: list[str] = []
    error = None
    pos = 0
    open_at = None
    for m in _TAG.finditer(rest):
        if m.group() == TOOL_CALL_OPEN:
            if open_at is not None:
                error = "nested or unclosed <tool_call> tag"
                calls.append(ToolCall(None, None, rest[open_at:m.start()], "unclosed <tool_call> tag"))
            else:
                content.append(rest[pos:m.start()])
            open_at = m.end()
        else:
            if open_at is None:
                error = "</tool_call> without a matching <tool_call>"
                content.append(rest[pos:m.start()])
            else:
                calls.append(parse_call_json(rest[open_at:m.start()]))
                open_at = None
            pos = m.end()
    if open_at is not None:
        error = "unclosed <tool_call> tag"
        calls.append(ToolCall(None, None, rest[open_at:], "unclosed <tool_call> tag"))
    else:
        content.append(rest[pos:])
    return ParsedResponse("".join(content).strip(), reasoning, tuple(calls), error)


def render_tool_call(name: str, arguments: dict[str, Any]) -> str:
    """Render one call exactly as Qwen3's chat template does."""
    payload = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"{TOOL_CALL_OPEN}\n{payload}\n{TOOL_CALL_CLOSE}"


def render_tool_calls(calls: list[tuple[str, dict[str, Any]]] | list[dict[str, Any]]) -> str:
    """Render several calls, newline-separated. Accepts (name, args) pairs or {name, arguments}."""
    out = []
    for c in calls:
        name, args = (c["name"], c.get("arguments", {})) if isinstance(c, dict) else c
        out.append(render_tool_call(name, args))
    return "\n".join(out)


def wrap_tool_response(content: str) -> str:
    """Wrap one tool result the way Qwen3's template does inside the user turn."""
    return f"{TOOL_RESPONSE_OPEN}\n{content}\n{TOOL_RESPONSE_CLOSE}"


TOOLS_PREAMBLE = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_POSTAMBLE = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


def as_openai_tool(schema: dict[str, Any]) -> dict[str, Any]:
    """Normalise a bare function schema to the OpenAI {"type": "function", "function": ...} form."""
    if schema.get("type") == "function" and "function" in schema:
        return schema
    return {"type": "function", "function": schema}


def render_tools_system_prompt(tools: list[dict[str, Any]], system: str | None = None) -> str:
    """The system message text Qwen3's chat template builds when ``tools`` are given.

    ``tools`` are OpenAI-style schemas (bare function schemas are wrapped). Each is dumped like
    Jinja's ``tojson`` in Hugging Face templates (``json.dumps(..., ensure_ascii=False)``).
    """
    head = f"{system}\n\n" if system else ""
    body = "".join("\n" + json.dumps(as_openai_tool(t), ensure_ascii=False) for t in tools)
    return head + TOOLS_PREAMBLE + body + TOOLS_POSTAMBLE
