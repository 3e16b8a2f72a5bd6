"""Task files of ``lopd/mcp-v0`` and the checks that score an episode.

One JSON object a line: ``task_id``, ``prompt``, optional ``system`` and ``split`` (default "train"),
and ``check``, a non-empty list of checks that must all hold for reward 1.0 (else 0.0)::

    {"task_id": "milk", "prompt": "Note that we need milk.",
     "check": [{"called": {"name": "add_note", "arguments": {"text": "milk"}}},
               {"probe": {"name": "list_notes", "arguments": {}}, "expect": {"contains": "milk"}},
               {"answer_matches": "(?i)noted|saved"}]}

The checks:

- ``{"called": {"name": N, "arguments": {...}}}``: some call of the episode to N succeeded with arguments
  that contain the given ones (a partial match: nested objects match by their given keys);
- ``{"answer_contains": S}`` / ``{"answer_matches": REGEX}``: the final answer (the assistant message with
  no tool call that ended the episode; none when the episode was truncated) contains S / matches
  REGEX (``re.search``);
- ``{"probe": {"name": N, "arguments": {...}}, "expect": {"contains": S} | {"equals": V}}``: a call the
  verifier makes on the episode's live server after the final answer; its text contains S, or equals V
  (a string, or any JSON value compared with the result's structured content, unwrapped from the SDKs'
  ``{"result": ...}``, or with its text parsed as JSON);
- ``{"verify": "module:function"}``: ``function(episode)`` (an :class:`Episode`) returns True, or a
  number equal to 1, for the check to hold.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.core import Task
from envs.trace import CallRecord

TASK_KEYS = {"task_id", "prompt", "system", "split", "check"}
CHECK_KINDS = ("called", "answer_contains", "answer_matches", "probe", "verify")


class TaskFileError(ValueError):
    """A task file (or one task) that cannot be used; the message names the line."""


@dataclass
class Episode:
    """What a check sees of one finished episode."""

    task: Task
    calls: list[CallRecord]
    """Every tool call of the episode, in order (``executed`` and ``error`` say how each went)."""
    answer: str | None
    """The final answer's text (reasoning removed); None when the episode did not end with one."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    probe: Callable[[str, dict[str, Any]], Any] | None = None
    """``probe(name, arguments)`` calls a tool on the live server; returns a ``CallOutcome``."""


def load_task_file(path: str | Path) -> list[Task]:
    """Read and check a task file; a bad line raises :class:`TaskFileError` naming it and why."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise TaskFileError(f"cannot read the task file {p}: {e}") from None
    tasks, seen = [], {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            task = parse_task(json.loads(line))
        except (json.JSONDecodeError, TaskFileError) as e:
            raise TaskFileError(f"{p}, line {n}: {e}") from None
        if task.task_id in seen:
            raise TaskFileError(f"{p}, line {n}: task_id {task.task_id!r} repeats line {seen[task.task_id]}")
        seen[task.task_id] = n
        tasks.append(task)
    if not tasks:
        raise TaskFileError(f"the task file {p} holds no task")
    return tasks


def parse_task(row: Any) -> Task:
    """One task from its JSON object (checked, see the module docstring)."""
    if not isinstance(row, dict):
        raise TaskFileError(f"a task must be a JSON object, got {type(row).__name__}")
    if unknown := sorted(set(row) - TASK_KEYS):
        raise TaskFileError(f"unknown key(s) {unknown}; a task has {sorted(TASK_KEYS)}")
    for key in ("task_id", "prompt"):
        if not isinstance(row.get(key), str) or not row[key]:
            raise TaskFileError(f"{key!r} must be a non-empty string")
    for key in ("system", "split"):
        if key in row and not isinstance(row[key], str):
            raise TaskFileError(f"{key!r} must be a string")
    checks = row.get("check")
    if not isinstance(checks, list) or not checks:
        raise TaskFileError("'check' must be a non-empty list of checks")
    for i, c in enumerate(checks):
        try:
            check_check(c)
        except TaskFileError as e:
            raise TaskFileError(f"check {i}: {e}") from None
    return Task(row["task_id"], row["prompt"], split=row.get("split", "train"), system=row.get("system"),
                data={"check": checks})


def _check_call_spec(spec: Any, kind: str) -> None:
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or set(spec) - {"name", "arguments"}:
        raise TaskFileError(f"{kind!r} must be {{'name': str, 'arguments': {{...}}}}, got {spec!r}")
    if not isinstance(spec.get("arguments", {}), dict):
        raise TaskFileError(f"{kind!r} arguments must be an object")


def check_check(c: Any) -> None:
    """Raise :class:`TaskFileError` unless ``c`` is one well-formed check."""
    kinds = [k for k in CHECK_KINDS if isinstance(c, dict) and k in c]
    if len(kinds) != 1:
        raise TaskFileError(f"a check has exactly one of {list(CHECK_KINDS)}, got {c!r}")
    kind, extra = kinds[0], set(c) - {kinds[0], "expect"}
    if extra or ("expect" in c) != (kind == "probe"):
        raise TaskFileError(f"unexpected key(s) in {c!r}" if extra else "'expect' goes with 'probe' only, and a "
                            "probe needs it")
    v = c[kind]
    if kind in ("called", "probe"):
        _check_call_spec(v, kind)
    if kind == "probe":
        e = c["expect"]
        if not (isinstance(e, dict) and len(e) == 1 and ("equals" in e or isinstance(e.get("contains"), str))):
            raise TaskFileError(f"'expect' must be {{'contains': str}} or {{'equals': value}}, got {e!r}")
    if kind in ("answer_contains", "answer_matches", "verify") and not isinstance(v, str):
        raise TaskFileError(f"{kind!r} must be a string")
    if kind == "answer_matches":
        try:
            re.compile(v)
        except re.error as e:
            raise TaskFileError(f"'answer_matches' is no regular expression: {e}") from None
    if kind == "verify":
        resolve_verifier(v)


def resolve_verifier(spec: str) -> Callable[[Episode], Any]:
    """``module:function`` as a callable (a clear error when it is none)."""
    mod, _, fn = spec.partition(":")
    if not mod or not fn:
        raise TaskFileError(f"'verify' must be 'module:function', got {spec!r}")
    try:
        obj = getattr(importlib.import_module(mod), fn)
    except (ImportError, AttributeError) as e:
        raise TaskFileError(f"cannot import the verifier {spec!r}: {type(e).__name__}: {e}") from None
    if not callable(obj):
        raise TaskFileError(f"the verifier {spec!r} is not callable")
    return obj


def contains(value: Any, partial: Any) -> bool:
    """Whether ``value`` holds ``partial``: objects by the given keys (recursively), the rest by equality."""
    if isinstance(partial, dict):
        return isinstance(value, dict) and all(k in value and contains(value[k], v) for k, v in partial.items())
    return value == partial


def _probe_holds(c: dict[str, Any], ep: Episode) -> tuple[bool, str]:
    if ep.probe is None:
        return False, "no live server to probe"
    out = ep.probe(c["probe"]["name"], c["probe"].get("arguments", {}))
    if out.error:
        return False, f"the probe failed: {out.text}"
    want = c["expect"]
    if "contains" in want:
        return want["contains"] in out.text, f"the probe gave {out.text[:200]!r}"
    v = want["equals"]
    if isinstance(v, str):
        return out.text == v, f"the probe gave {out.text[:200]!r}"
    try:
        parsed = json.loads(out.text)
    except ValueError:
        parsed = None
    structured = out.structured
    if isinstance(structured, dict) and list(structured) == ["result"]:
        structured = structured["result"]  # the SDKs wrap a tool's non-object return value so
    return v in (structured, parsed), f"the probe gave {out.text[:200]!r}"


def check_holds(c: dict[str, Any], ep: Episode) -> tuple[bool, str]:
    """Whether one check holds for ``ep``, and why not (a check that raises does not hold)."""
    if "called" in c:
        spec = c["called"]
        ok = any(r.executed and r.error is None and r.name == spec["name"]
                 and contains(r.arguments or {}, spec.get("arguments", {})) for r in ep.calls)
        return ok, f"no successful call {spec['name']}({spec.get('arguments', {})})"
    if "answer_contains" in c:
        return ep.answer is not None and c["answer_contains"] in ep.answer, "the answer does not contain it"
    if "answer_matches" in c:
        return ep.answer is not None and re.search(c["answer_matches"], ep.answer) is not None, \
            "the answer does not match"
    if "probe" in c:
        return _probe_holds(c, ep)
    try:
        r = resolve_verifier(c["verify"])(ep)
    except Exception as e:  # noqa: BLE001 - a broken verifier fails its check, never the episode
        return False, f"{c['verify']} raised {type(e).__name__}: {e}"
    return (r is True or (isinstance(r, (int, float)) and not isinstance(r, bool) and r == 1)), f"it returned {r!r}"


def score(checks: list[dict[str, Any]], ep: Episode) -> tuple[float, list[dict[str, Any]]]:
    """1.0 when every check holds, else 0.0; and each check's verdict (``held``, ``why`` when not)."""
    verdicts = []
    for c in checks:
        held, why = check_holds(c, ep)
        verdicts.append({"check": c, "held": held, **({} if held else {"why": why})})
    return (1.0 if all(v["held"] for v in verdicts) else 0.0), verdicts
