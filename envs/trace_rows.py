"""Episodes as OpenAI-style dataset rows, and rows (ours or anybody's) back as episodes.

A row is one episode: ``messages`` (system/user/assistant/tool; assistant ``tool_calls`` in the OpenAI
format, ``function.arguments`` a JSON string; ``tool_call_id`` on tool messages), ``tools`` (OpenAI function
schemas), ``reward``, ``env_id``, ``task_id``, ``split`` and the metadata an :class:`Episode` keeps. Our own
rows also carry ``steps``, the step records verbatim, so they come back whole; a foreign row's steps are
rebuilt from its messages (docs/TRACES.md says what that loses). Stdlib only, like :mod:`envs.trace`.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from envs.trace import TRACE_VERSION, CallRecord, Episode, Step

COLUMNS = ("messages", "tools", "reward", "env_id", "task_id", "split", "seed", "terminated", "truncated",
           "n_steps", "n_tool_calls", "meta", "timings", "prompt_token_ids", "steps", "trace_version")
"""The columns of an exported row, in order."""


def call_id(step: int, j: int) -> str:
    """The id export gives call ``j`` of step ``step`` (deterministic, so exports are reproducible)."""
    return f"call_{step}_{j}"


def _answered(step: Step) -> list[tuple[int, CallRecord]]:
    """The calls of ``step`` that a tool message answers, in order: the env replies to each call it ran
    or refused (``result`` set); an env that sets no result answers them all in order."""
    calls = list(enumerate(step.calls))
    return [(j, c) for j, c in calls if c.result is not None or c.executed] or calls


def _tool_call(step: int, j: int, c: CallRecord) -> dict[str, Any]:
    args = json.dumps(c.arguments if c.arguments is not None else {}, ensure_ascii=False)
    return {"id": call_id(step, j), "type": "function", "function": {"name": c.name, "arguments": args}}


def openai_messages(ep: Episode) -> list[dict[str, Any]]:
    """``ep.messages`` with OpenAI ``tool_calls`` on the k-th assistant message (from ``ep.steps[k]``'s
    parsed calls) and ``tool_call_id`` on the tool messages that answer one. A tool message that answers
    a call that did not parse has no call to point at: its ``tool_call_id`` stays None."""
    out: list[dict[str, Any]] = []
    k, pending = -1, []
    for m in ep.messages:
        m = {key: v for key, v in m.items() if key not in ("tool_calls", "tool_call_id")}
        if m.get("role") == "assistant":
            k += 1
            step = ep.steps[k] if k < len(ep.steps) else None
            calls = [(j, c) for j, c in enumerate(step.calls) if c.name is not None] if step else []
            m["tool_calls"] = [_tool_call(k, j, c) for j, c in calls] or None  # None: OpenAI omits the key
            pending = _answered(step) if step else []
        elif m.get("role") == "tool":
            j, c = pending.pop(0) if pending else (None, None)
            m["tool_call_id"] = call_id(k, j) if c is not None and c.name is not None else None
        out.append(m)
    return out


def episode_to_row(ep: Episode) -> dict[str, Any]:
    """One exported row (the keys of :data:`COLUMNS`)."""
    return {
        "messages": openai_messages(ep), "tools": ep.tools, "reward": float(ep.reward), "env_id": ep.env_id,
        "task_id": ep.task_id, "split": ep.split, "seed": ep.seed, "terminated": ep.terminated,
        "truncated": ep.truncated, "n_steps": len(ep.steps), "n_tool_calls": ep.n_tool_calls, "meta": ep.meta,
        "timings": ep.timings, "prompt_token_ids": ep.prompt_token_ids,
        "steps": [asdict(s) for s in ep.steps], "trace_version": ep.version,
    }


def _clean(m: Any) -> dict[str, Any]:
    # Arrow gives every message every struct field; the ones it filled with None were never there.
    if not isinstance(m, dict):
        raise ValueError(f"a message must be an object, got {type(m).__name__}")
    return {k: v for k, v in m.items() if v is not None}


def _arguments(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """Parsed arguments of an OpenAI call (a JSON string, or already an object), or why not."""
    if isinstance(raw, dict):
        return raw, None
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as e:
        return None, f"arguments are not JSON: {e}"
    return (args, None) if isinstance(args, dict) else (None, f"arguments are not an object: {raw!r}"[:200])


def _call(tc: Any) -> tuple[str | None, CallRecord]:
    fn = tc.get("function") if isinstance(tc, dict) else None
    fn = fn if isinstance(fn, dict) else {}
    args, err = _arguments(fn.get("arguments"))
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        name, err = None, err or "the call has no function name"
    return tc.get("id") if isinstance(tc, dict) else None, CallRecord(name, args, parse_error=err)


def steps_from_messages(messages: list[dict[str, Any]], reward: float, terminated: bool) -> list[Step]:
    """Steps rebuilt from OpenAI messages: one per assistant message, its ``tool_calls`` as calls; a tool
    message answers the call its ``tool_call_id`` names (else the next unanswered one), which marks that
    call executed with the message's content as result. The outcome reward lands on the last step."""
    steps: list[Step] = []
    ids: dict[str, CallRecord] = {}
    for m in messages:
        if m.get("role") == "assistant":
            pairs = [_call(tc) for tc in m.get("tool_calls") or []]
            ids = {i: c for i, c in pairs if i}
            content = m.get("content")
            steps.append(Step(len(steps), content if isinstance(content, str) else "", calls=[c for _, c in pairs]))
        elif steps and m.get("role") != "system":
            text = m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
            step = steps[-1]
            step.observation = f"{step.observation}\n{text}" if step.observation else text
            if m.get("role") == "tool":
                c = ids.get(m.get("tool_call_id")) or next((c for c in step.calls if not c.executed), None)
                if c is not None and not c.executed:
                    c.executed, c.result = True, text
    if steps:
        steps[-1].reward, steps[-1].terminated = reward, terminated
    return steps


def row_to_episode(row: dict[str, Any], *, env_id: str = "unknown", task_id: str = "") -> Episode:
    """The episode of one row; ``env_id``/``task_id`` stand in where the row has none. Raises ValueError
    (or TypeError) on a row of the wrong shape; ``messages`` is the one column a row must have."""
    if "messages" not in row or row["messages"] is None:
        raise ValueError("the row has no 'messages'")
    if not isinstance(row["messages"], list):
        raise ValueError(f"'messages' must be a list, got {type(row['messages']).__name__}")
    messages = [_clean(m) for m in row["messages"]]
    ours = row.get("steps") is not None
    if ours:  # export added the OpenAI call fields; our envs' messages never hold them
        messages = [{k: v for k, v in m.items() if k not in ("tool_calls", "tool_call_id")} for m in messages]
    reward = float(row.get("reward") or 0.0)
    terminated = bool(row.get("terminated", True))
    d = {
        "env_id": str(row.get("env_id") or env_id), "task_id": str(row.get("task_id") or task_id),
        "split": str(row.get("split") or "train"), "seed": row.get("seed"), "messages": messages,
        "tools": list(row.get("tools") or []), "prompt_token_ids": row.get("prompt_token_ids"),
        "reward": reward, "terminated": terminated, "truncated": bool(row.get("truncated") or False),
        "timings": dict(row.get("timings") or {}), "meta": dict(row.get("meta") or {}),
        "version": TRACE_VERSION, "steps": list(row["steps"]) if ours else [],
    }
    ep = Episode.from_dict(d)
    if not ours:
        ep.steps = steps_from_messages(messages, reward, terminated)
    return ep
