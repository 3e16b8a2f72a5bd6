"""Turn a model response into one EnvScaler action, with the authors' rules.

The authors' runner (EnvScaler ``parse_response`` + ``parse_action``) reads a response so:

1. The text is stripped. A think block ``<think>...</think>`` (``@think@`` spellings too, any case)
   is reasoning; an opening think tag that never closes is a parse failure.
2. The FIRST ``<tool_call>{...}</tool_call>`` (regex ``<tool_call>\\s*(\\{.*?\\})\\s*</tool_call>``,
   DOTALL, searched over the whole text) is the call; any later ones are ignored. A
   ``<tool_call>`` with no ``</tool_call>`` anywhere is a parse failure. The call's JSON must load
   and hold both "name" and "arguments" (arguments may be a JSON string).
3. Content is the text outside the think block before the call (or after the think block, or all).
   A call wins over content. Content without a call is ``chat_with_user`` (the end of the episode
   in the non-conversational runner). No call and no content is a parse failure.

The regexes are matched here by linear scans (same matches), so a hostile 1 MiB response cannot
make matching quadratic.

>>> parse_action('<think>hm</think>\\n<tool_call>\\n{"name": "f", "arguments": {"x": 1}}\\n</tool_call>')
Action(name='f', arguments={'x': 1}, error=None, n_blocks=1)
>>> parse_action("All done. Task Completed").name
'chat_with_user'
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

CHAT = "chat_with_user"
PARSE_RESPONSE_ERROR = "Error: Failed to parse response to struct response"
PARSE_ACTION_ERROR = "Error: Failed to parse response to action"

_THINK_OPEN = re.compile(r"(?:<|@)think(?:>|@)", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"(?:<|@)/think(?:>|@)", re.IGNORECASE)
_CALL_OPEN = "<tool_call>"
_CALL_CLOSE = "</tool_call>"


@dataclass(frozen=True)
class Action:
    """The one action a response asks for, or the reason it gives none.

    ``error`` is one of the two authors' parse-error observations when parsing failed; then
    ``name`` is None. ``n_blocks`` counts every ``<tool_call>`` block (for behaviour statistics).
    """

    name: Any
    arguments: Any
    error: str | None = None
    n_blocks: int = 0


def _think_match(text: str) -> tuple[int, int] | None:
    """(start, end) of the first complete think block, as the authors' regex search finds it."""
    o = _THINK_OPEN.search(text)
    if o is None:
        return None
    c = _THINK_CLOSE.search(text, o.end())  # the lazy body ends at the first close after the opening
    return (o.start(), c.end()) if c else None


def _first_call(text: str) -> tuple[int, str] | None:
    """(start, JSON body) of the first ``<tool_call>\\s*({.*?})\\s*</tool_call>`` match."""
    # Each close tag preceded (after whitespace) by '}' marks where a lazy body can end.
    ends: list[tuple[int, int]] = []  # (index of that '}', index of the close tag)
    pos = text.find(_CALL_CLOSE)
    while pos != -1:
        j = pos - 1
        while j >= 0 and text[j].isspace():
            j -= 1
        if j >= 0 and text[j] == "}":
            ends.append((j, pos))
        pos = text.find(_CALL_CLOSE, pos + 1)
    if not ends:
        return None
    k = 0
    start = text.find(_CALL_OPEN)
    while start != -1:
        b = start + len(_CALL_OPEN)
        while b < len(text) and text[b].isspace():
            b += 1
        if b < len(text) and text[b] == "{":
            while k < len(ends) and ends[k][0] <= b:
                k += 1
            if k == len(ends):
                return None  # no later opening can end either
            return start, text[b : ends[k][0] + 1]
        start = text.find(_CALL_OPEN, start + 1)
    return None


def parse_action(text: Any) -> Action:
    """Read one response with the authors' rules. Never raises."""
    if not isinstance(text, str):
        return Action(None, None, PARSE_RESPONSE_ERROR)
    text = text.strip()
    n_blocks = text.count(_CALL_OPEN)
    ok = True
    think = _think_match(text)
    if think is None and _THINK_OPEN.search(text):
        ok = False  # an opening think tag that never closes
    call = _first_call(text)
    if call is None and _CALL_OPEN in text and _CALL_CLOSE not in text:
        ok = False  # unclosed <tool_call>
    if think and call:
        content = text[think[1] : call[0]].strip()
    elif think:
        content = text[think[1] :].strip()
    elif call:
        content = text[: call[0]].strip()
    else:
        content = text
    fn: Any = None
    if call:
        try:
            obj = json.loads(call[1])
        except (json.JSONDecodeError, RecursionError):
            obj, ok = None, False
        if obj is not None:
            if isinstance(obj, dict) and "name" in obj and "arguments" in obj:
                fn = copy.deepcopy(obj)
            else:
                ok = False
    if not ok:
        return Action(None, None, PARSE_RESPONSE_ERROR, n_blocks)
    if fn is not None:
        args = fn["arguments"]
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except (json.JSONDecodeError, RecursionError):
                return Action(None, None, PARSE_ACTION_ERROR, n_blocks)
        return Action(fn["name"], args, None, n_blocks)
    if content:
        return Action(CHAT, {"content": content}, None, n_blocks)
    return Action(None, None, PARSE_ACTION_ERROR, n_blocks)
