"""Model outputs built from ACEBench's answers: the ground-truth replay used by tests and benchmarks.

- :func:`normal_output` renders an answer as a prompt-format output ``[f(a=1), g(b='x')]``
  (``_<n>`` suffixes stripped, values with ``repr``).
- :func:`special_output` writes the sentence the special checker looks for.
- :func:`repair_milestone` fixes the milestone strings whose quoting is not valid Python
  (``'Domino's'``): a quote closes a string only when followed by ``, ) ] } :`` or the end.
- :func:`replay_agent` runs milestone messages through an :class:`AgentRuntime` and returns the
  saved states and the process list.

>>> normal_output({"f_1": {"a": 1}, "f_2": {"a": "x y"}})
"[f(a=1), f(a='x y')]"
>>> repair_milestone("[f(name='Domino's', n=1)]")
"[f(name='Domino\\\\'s', n=1)]"
"""

from __future__ import annotations

import re
from typing import Any

from envs.acebench.data import Entry
from envs.acebench.executor import AgentRuntime
from envs.acebench.special_checker import ERROR_PHRASE, INCOMPLETE_PHRASE

_SUFFIX = re.compile(r"_\d+$")
_CLOSERS = ",)]}:"


def normal_output(answer: dict[str, Any], strip_suffix: bool = True) -> str:
    """A prompt-format output that calls exactly what one answer dict expects."""
    calls = []
    for key, params in answer.items():
        name = _SUFFIX.sub("", key) if strip_suffix else key
        calls.append(f"{name}(" + ", ".join(f"{p}={v!r}" for p, v in params.items()) + ")")
    return "[" + ", ".join(calls) + "]"


def special_output(category: str, answer: Any) -> str:
    """The reply a correct model gives on a special entry."""
    if "incomplete" in category:
        return " ".join(
            f'["{INCOMPLETE_PHRASE} ({", ".join(v)}) for the api ({k})"]' for k, v in answer.items()
        )
    if "error" in category:
        return " ".join(
            f'["{ERROR_PHRASE} ({", ".join(v)}) for the parameters ({k}) in the conversation history."]'
            for k, v in answer.items()
        )
    return '["Due to the limitations of the function, I cannot solve this problem."]'


def repair_milestone(text: str) -> str:
    """Escape apostrophes that sit inside single- or double-quoted strings of a call string."""
    out: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(text):
        ch = text[i]
        if quote is None:
            if ch in "'\"":
                quote = ch
            out.append(ch)
        elif ch == "\\":
            out.append(text[i : i + 2])
            i += 2
            continue
        elif ch == quote:
            rest = text[i + 1 :].lstrip()
            if not rest or rest[0] in _CLOSERS:
                quote = None
                out.append(ch)
            else:
                out.append("\\" + ch)
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def milestone_lists(entry: Entry) -> list[list[str]]:
    """The entry's milestone sequence(s): alternatives when upstream lists several."""
    stones = entry.mile_stone or []
    if stones and isinstance(stones[0], list):
        return [list(s) for s in stones]
    return [list(stones)]


def replay_agent(
    entry: Entry, milestones: list[str], repair: bool = True
) -> tuple[list[dict[str, Any]], list[str]]:
    """Run milestone messages in a fresh runtime: (saved states, process).

    With ``repair`` each message is normalised first: surrounding whitespace is stripped (upstream's
    decoder fails on ``"[f()] "``) and inner apostrophes are escaped (:func:`repair_milestone`).
    """
    mode = "multi_turn" if entry.category.endswith("multi_turn") else "multi_step"
    runtime = AgentRuntime(entry.language, entry.initial_config, entry.involved_classes, mode)
    process = []
    for message in milestones:
        text = repair_milestone(message.strip()) if repair else message
        runtime.respond(text)
        process.append(message)
    return runtime.snapshot(), process


# ---- explaining ground truths that cannot pass ----------------------------------------------

EXCEPTIONS_FILE = __import__("pathlib").Path(__file__).with_name("ground_truth_exceptions.json")


def _has_spaced_string(value: Any) -> bool:
    if isinstance(value, str):
        return any(ch.isspace() for ch in value)
    if isinstance(value, (list, tuple)):
        return any(_has_spaced_string(v) for v in value)
    if isinstance(value, dict):
        return any(_has_spaced_string(v) for v in value.values())
    return False


def _nested_non_string_with_space(value: Any) -> bool:
    """An object holding, below its top level, a non-string value whose str() keeps spaces."""
    if not isinstance(value, dict):
        return False
    for v in value.values():
        if isinstance(v, dict):
            if _nested_non_string_with_space(v):
                return True
        elif not isinstance(v, str) and _has_spaced_string(v):
            return True
    return False


def diagnose_normal(entry: Entry) -> list[tuple[str, str]]:
    """Why a normal entry's own answer fails ACEBench's rules: [(kind, detail)] per failing call."""
    from envs.acebench.decode import decode_prompt
    from envs.acebench.normal_checker import find_description, simple_function_check

    answer = entry.ground_truth[0] if isinstance(entry.ground_truth, list) else entry.ground_truth
    found: list[tuple[str, str]] = []
    for key, params in answer.items():
        doc = find_description(entry.functions, key)
        name = _SUFFIX.sub("", key)
        if doc is not None and _SUFFIX.search(doc.get("name", "")) and doc["name"] == key:
            found.append(
                (
                    "numeric_suffix_function_name",
                    f"{key}: the checker strips _<n> from answer keys, so no call name can match",
                )
            )
            continue
        call = decode_prompt(normal_output({name: params})).calls[0]
        result = simple_function_check(doc, call, {name: params}, entry.category)
        if result["valid"]:
            continue
        props = (doc or {}).get("parameters", {}).get("properties", {})
        before = len(found)
        if result["error_type"] == "lack_args":
            found.append(
                (
                    "required_param_absent_from_answer",
                    f"{key}: {result['error']}; the answer omits a required param, so any call fails",
                )
            )
            continue
        for p, v in params.items():
            schema = props.get(p, {})
            if v in ([], {}) and schema.get("type") in ("array", "object"):
                found.append(
                    (
                        "empty_answer_container",
                        f"{key}.{p}: the answer is {v!r}; the nested type check never passes on it",
                    )
                )
            elif (
                schema.get("type") == "array"
                and "items" not in schema
                and not all(isinstance(x, dict) for x in v)
            ):
                found.append(
                    (
                        "array_without_items_checked_as_objects",
                        f"{key}.{p}: the schema gives no item type, so items are checked as objects",
                    )
                )
            elif schema.get("type") in ("object", "array") and (
                _nested_non_string_with_space(v)
                or (isinstance(v, list) and any(_nested_non_string_with_space(x) for x in v))
            ):
                found.append(
                    (
                        "whitespace_in_nested_value",
                        f"{key}.{p}: a value inside the object keeps spaces in str(answer) while the "
                        "output lost all whitespace before decoding",
                    )
                )
        if len(found) == before:
            found.append(("other", f"{key}: {result['error_type']}: {result['error']}"[:300]))
    return found
