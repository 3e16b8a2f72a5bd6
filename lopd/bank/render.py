"""Render an episode as an observation-lite experience: the task, then exact calls and cut results.

>>> from envs.trace import CallRecord, Episode, Step
>>> ep = Episode("lopd/shop-v0", "t1", messages=[{"role": "user", "content": "Buy 2 apples"}],
...              steps=[Step(0, "<tool_call>...</tool_call>", calls=[CallRecord(
...                  "add", {"item": "apple", "n": 2}, executed=True, result="cart: " + "x" * 50)]),
...                     Step(1, "<think>done?</think>Done: 2 apples.")], reward=1.0)
>>> task, traj = render_episode(ep, observation_chars=12)
>>> print(traj)
[1] Action: {"name": "add", "arguments": {"item": "apple", "n": 2}}
[1] Result: cart: xxxxxx ...[+44 chars]
[2] Response: Done: 2 apples.
"""

from __future__ import annotations

import json
import re
from typing import Any

from envs.trace import Episode

_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
_LEADING_THINK_CLOSE = re.compile(r"\A.*?</think>", re.DOTALL)  # template put <think> in the prompt
_TOOL_CALL = re.compile(r"<tool_call>.*?(?:</tool_call>|\Z)", re.DOTALL)
_TOOL_RESPONSE = re.compile(r"</?tool_response>")


def cut(text: str, budget: int) -> str:
    """``text`` cut to ``budget`` characters with a marker saying how much was dropped (-1: no cut)."""
    if budget < 0 or len(text) <= budget:
        return text
    return f"{text[:budget].rstrip()} ...[+{len(text) - budget} chars]"


def lite(text: str, budget: int) -> str:
    """Collapse whitespace runs (pretty-printed JSON is mostly indentation), then cut."""
    return cut(" ".join(text.split()), budget)


def task_text(episode: Episode) -> str | None:
    """The task description: the first user message (None when the trace has none)."""
    for m in episode.messages:
        if isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), str):
            return m["content"].strip() or None
    return None


def visible_content(text: str, keep_reasoning: bool = False) -> str:
    """The response text without tool-call blocks (and without <think> reasoning by default)."""
    if not keep_reasoning:
        if "</think>" in text and "<think>" not in text.split("</think>", 1)[0]:
            text = _LEADING_THINK_CLOSE.sub("", text, count=1)
        text = _THINK.sub("", text)
    return _TOOL_CALL.sub("", text).strip()


def _call_json(name: str, arguments: Any) -> str:
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


def render_episode(episode: Episode, *, observation_chars: int = 300, response_chars: int = 500,
                   keep_reasoning: bool = False, executed_calls_only: bool = True) -> tuple[str | None, str]:
    """(task description, trajectory text). See :class:`lopd.bank.BankConfig` for the options."""
    lines: list[str] = []
    for n, step in enumerate(episode.steps, 1):
        calls = [c for c in step.calls if c.name is not None and c.parse_error is None
                 and (c.executed or not executed_calls_only)]
        if calls:
            for c in calls:
                note = "" if c.executed else " (not executed)"
                lines.append(f"[{n}] Action{note}: {_call_json(c.name, c.arguments)}")
                if c.executed and observation_chars != 0 and c.result is not None:
                    lines.append(f"[{n}] Result: {lite(c.result, observation_chars)}")
            continue
        content = visible_content(step.text, keep_reasoning)
        if content:
            lines.append(f"[{n}] Response: {cut(content, response_chars)}")
        # A turn without executed calls may still be answered (a simulated user, an error message).
        obs = _TOOL_RESPONSE.sub("", step.observation or "").strip()
        if obs and observation_chars != 0:
            lines.append(f"[{n}] Observation: {lite(obs, observation_chars)}")
    return task_text(episode), "\n".join(lines)
