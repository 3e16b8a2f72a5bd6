"""Systematic variants of BFCL ground-truth outputs, for agreement checks against the official checker.

``single_turn_cases(entry, fmt)`` and ``multi_turn_cases(entry, fmt)`` yield ``(label, result)`` pairs:
the ground truth itself plus mutations (wrong value, missing/extra parameter, wrong type, wrong
function, dropped/reordered parallel calls, string-format variants, decoder edge cases). The labels
say what was changed; which verdict each should get is decided by the official checker, not here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from benchmarks.mutations import wrong_type
from envs.bfcl.ast_checker import underscore_name
from envs.bfcl.data import Entry
from envs.bfcl.replay import _typed_source, answer_calls, ground_truth_output, keyword_call


def _render(entry: Entry, calls: list[tuple[str, dict[str, Any]]], fmt: str, typed: bool = True) -> Any:
    if typed and entry.language in ("Java", "JavaScript"):
        calls = [(n, _typed_source(entry, n, a)) for n, a in calls]
    if fmt == "fc":
        return [{underscore_name(n): json.dumps(a)} for n, a in calls]
    return (
        "[" + ", ".join(f"{n}(" + ", ".join(f"{k}={v!r}" for k, v in a.items()) + ")" for n, a in calls) + "]"
    )


def _bump(v: Any) -> Any:
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + 1
    if isinstance(v, float):
        return v + 0.5
    if isinstance(v, str):
        return v + " extra"
    if isinstance(v, list):
        return v[:-1] if v else ["x"]
    if isinstance(v, dict):
        return {**v, "zz_extra": 1}
    return "changed"


def _string_variants(s: str) -> list[tuple[str, str]]:
    return [
        ("upper", s.upper()),
        ("spaced", s.replace(" ", "  ")),
        ("dashed", s.replace(" ", "-")),
        ("dots", s + "."),
        ("quote", s + "'"),
        ("punct_inside", "_".join(s.split(" "))),
        ("trailing_char", s + "x"),
    ]


def single_turn_cases(entry: Entry, fmt: str) -> Iterator[tuple[str, Any]]:
    yield "ground_truth", ground_truth_output(entry, fmt)
    calls = answer_calls(entry.answer)
    if not calls:
        return
    name0, args0 = calls[0]
    if args0:
        p0 = next(iter(args0))
        v0 = args0[p0]
        yield "wrong_value", _render(entry, [(name0, {**args0, p0: _bump(v0)})] + calls[1:], fmt)
        yield (
            "missing_param",
            _render(entry, [(name0, {k: v for k, v in args0.items() if k != p0})] + calls[1:], fmt),
        )
        yield (
            "wrong_type",
            _render(entry, [(name0, {**args0, p0: wrong_type(v0)})] + calls[1:], fmt, typed=False),
        )
        if isinstance(v0, str):
            for label, s in _string_variants(v0):
                yield f"string_{label}", _render(entry, [(name0, {**args0, p0: s})] + calls[1:], fmt)
        if isinstance(v0, int) and not isinstance(v0, bool):
            yield "int_as_float", _render(entry, [(name0, {**args0, p0: float(v0)})] + calls[1:], fmt)
        if isinstance(v0, list) and fmt == "prompt":
            yield "list_as_tuple", _render(entry, [(name0, {**args0, p0: tuple(v0)})] + calls[1:], fmt)
        # drop every optional answer parameter the doc does not require
        doc = next((d for d in entry.functions if d["name"] == name0), None)
        if doc is not None:
            req = set(doc["parameters"].get("required", []))
            yield (
                "only_required",
                _render(entry, [(name0, {k: v for k, v in args0.items() if k in req})] + calls[1:], fmt),
            )
    yield "extra_param", _render(entry, [(name0, {**args0, "zz_extra": 1})] + calls[1:], fmt)
    yield "wrong_function", _render(entry, [(name0 + "_x", args0)] + calls[1:], fmt)
    if "." in name0:
        other = "prompt" if fmt == "fc" else "fc"
        yield (
            "other_name_style",
            _render(entry, [(underscore_name(name0) if other == "fc" else name0, args0)] + calls[1:], fmt),
        )
    if len(calls) > 1:
        yield "dropped_call", _render(entry, calls[:-1], fmt)
        yield "reordered_calls", _render(entry, list(reversed(calls)), fmt)
        yield "duplicated_call", _render(entry, calls + calls[:1], fmt)
    else:
        yield "duplicated_call", _render(entry, calls * 2, fmt)
    yield "empty", [] if fmt == "fc" else "[]"
    yield "text", "I cannot call any function for this."
    if fmt == "prompt":
        gt = ground_truth_output(entry, fmt)
        yield "fenced", f"```python\n{gt}\n```"
        yield "no_brackets", gt[1:-1]
        yield "positional_arg", gt.replace("(", "(1, ", 1) if entry.language == "Python" else gt


def relevance_cases(entry: Entry, fmt: str) -> Iterator[tuple[str, Any]]:
    doc = entry.functions[0] if entry.functions else {"name": "f", "parameters": {"properties": {}}}
    name = doc["name"]
    props = list((doc.get("parameters") or {}).get("properties") or {})
    args = {p: "x" for p in props[:2]}
    if fmt == "fc":
        yield "empty", []
        yield "text", "Sorry, none of the functions apply."
        yield "call", [{underscore_name(name): json.dumps(args)}]
        yield "call_no_args", [{underscore_name(name): "{}"}]
        yield "bad_json", [{underscore_name(name): "{not json"}]
    else:
        yield "empty", "[]"
        yield "text", "Sorry, none of the functions apply."
        yield "call", f"[{name}(" + ", ".join(f"{k}='x'" for k in args) + ")]"
        yield "call_no_args", f"[{name}()]"
        yield "empty_dict_call", "[{}]"


def multi_turn_cases(entry: Entry, fmt: str) -> Iterator[tuple[str, Any]]:
    gt = ground_truth_output(entry, fmt)
    yield "ground_truth", gt
    kw = [[keyword_call(c, entry.involved_classes) for c in turn] for turn in entry.answer]

    def render(turns: list[list[tuple[str, dict[str, Any]]]], split: bool = False) -> list[list[Any]]:
        out = []
        for calls in turns:
            if not calls:
                out.append([])
                continue
            groups = [[c] for c in calls] if split else [calls]
            steps = []
            for g in groups:
                if fmt == "fc":
                    steps.append([{n: json.dumps(a)} for n, a in g])
                else:
                    steps.append(
                        "["
                        + ", ".join(
                            f"{n}(" + ", ".join(f"{k}={v!r}" for k, v in a.items()) + ")" for n, a in g
                        )
                        + "]"
                    )
            out.append(steps + ["Done."])
        return out

    yield "one_step_per_call", render(kw, split=True)
    last = max((i for i, t in enumerate(kw) if t), default=None)
    if last is not None:
        dropped = [list(t) for t in kw]
        dropped[last] = dropped[last][:-1]
        yield "dropped_last_call", render(dropped)
        emptied = [list(t) for t in kw]
        emptied[last] = []
        yield "empty_turn", render(emptied)
        name, args = kw[last][-1]
        if args:
            p = next(iter(args))
            changed = [list(t) for t in kw]
            changed[last] = changed[last][:-1] + [(name, {**args, p: _bump(args[p])})]
            yield "wrong_value", render(changed)
        extra = [list(t) for t in kw]
        extra[last] = extra[last] + [("not_a_real_function", {"x": 1})]
        yield "unknown_extra_call", render(extra)
        dup = [list(t) for t in kw]
        dup[last] = dup[last] + dup[last][-1:]
        yield "duplicated_last_call", render(dup)
    first = next((i for i, t in enumerate(kw) if t), None)
    if first is not None and len(kw[first]) > 1:
        rev = [list(t) for t in kw]
        rev[first] = list(reversed(rev[first]))
        yield "reordered_first_turn", render(rev)
    yield "missing_turn", render(kw)[:-1]
    yield "all_text", [["I will not call anything."] for _ in kw]
