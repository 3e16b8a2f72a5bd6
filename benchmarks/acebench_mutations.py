"""Systematic variants of ACEBench ground-truth outputs, for agreement checks against the official evaluator.

``normal_cases(entry)``, ``special_cases(entry)`` and ``agent_cases(entry)`` yield ``(label, result,
process)`` triples (``process`` is None outside the agent family): the ground truth itself plus
mutations (wrong value, missing/extra param, wrong type, wrong function, dropped/reordered/duplicated
parallel calls, string-format and whitespace variants, decoder edge cases; for special entries phrase
and container variants; for agent entries state and process variants). ``fuzz_cases`` adds seeded
character-level mutations. The labels say what was changed; the verdict each should get is decided by
the official evaluator, not here.

>>> from envs.acebench.data import load_category, has_acebench
>>> if has_acebench():
...     e = load_category("en", "normal_atom_bool")[0]
...     print(next(normal_cases(e))[0])
gt
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Callable, Iterator
from typing import Any

from benchmarks.mutations import fuzz_text, wrong_type
from envs.acebench.data import Entry
from envs.acebench.ground_truth import milestone_lists, normal_output, replay_agent, special_output

_SUFFIX = re.compile(r"_\d+$")
NO_PROCESS = "__no_process_key__"
"""As a process: the result line has no "process" key at all."""
Case = tuple[str, Any, Any]


def _alternatives(entry: Entry) -> list[dict[str, Any]]:
    gt = entry.ground_truth
    alts = gt if isinstance(gt, list) else [gt]
    return [a for a in alts if isinstance(a, dict)]


def _calls(answer: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(_SUFFIX.sub("", k), dict(v) if isinstance(v, dict) else {}) for k, v in answer.items()]


def render(calls: list[tuple[str, dict[str, Any]]], value=repr, sep: str = ", ", kw: str = "=") -> str:
    """``[f(a=1), g(b='x')]`` with a custom value renderer, separator and keyword sign."""
    return (
        "["
        + sep.join(f"{n}(" + sep.join(f"{k}{kw}{value(v)}" for k, v in a.items()) + ")" for n, a in calls)
        + "]"
    )


def _dq(v: Any) -> str:
    """Python source of ``v`` with double-quoted strings."""
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_dq(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_dq(k)}: {_dq(x)}" for k, x in v.items()) + "}"
    return repr(v)


def wrong_value(v: Any) -> Any:
    """A value of ``v``'s type that the checker must reject (numbers shifted, strings replaced, a list
    shortened, a dict's first value changed)."""
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + 7
    if isinstance(v, float):
        return v + 1.5
    if isinstance(v, str):
        return "qqqzzz"
    if isinstance(v, list):
        return v[:-1] if v else ["zzz"]
    if isinstance(v, dict):
        if not v:
            return {"zzz": 1}
        k = next(iter(v))
        return {**v, k: wrong_value(v[k])}
    return "changed"


def _wrong_type(v: Any) -> Any:
    # "true"/"false" would pass: ACEBench's checker reads those strings as booleans
    return "yes" if isinstance(v, bool) else wrong_type(v)


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _map_leaves(v: Any, is_leaf: Callable[[Any], bool], f: Callable[[Any], Any]) -> Any:
    """``v`` with ``f`` applied to every leaf (inside lists and dict values) that ``is_leaf``."""
    if is_leaf(v):
        return f(v)
    if isinstance(v, list):
        return [_map_leaves(x, is_leaf, f) for x in v]
    if isinstance(v, dict):
        return {k: _map_leaves(x, is_leaf, f) for k, x in v.items()}
    return v


_LEAF_VARIANTS: tuple[tuple[str, Callable[[Any], bool], Callable[[Any], Any]], ...] = (
    ("upper_strings", _is_str, str.upper),
    ("punct_strings", _is_str, lambda s: s.replace(" ", "_") + "."),
    ("spaced_strings", _is_str, lambda s: " ".join(s)),
    ("numbers_as_floats", _is_number, float),
    ("numbers_as_strings", _is_number, str),
)
"""(label, which leaves, how) for the variants that change every string or number of every call."""


def _with(calls, i: int, params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = list(calls)
    out[i] = (calls[i][0], params)
    return out


def normal_cases(entry: Entry, max_params: int = 3) -> Iterator[Case]:
    """Ground truth (every alternative) and mutations of a normal entry's first answer."""
    alts = _alternatives(entry)
    if not alts:
        yield "empty_list", "[]", None
        return
    for label, result in _normal_variants(entry, alts, max_params):
        yield label, result, None


def _normal_variants(entry: Entry, alts: list[dict[str, Any]], max_params: int) -> Iterator[tuple[str, Any]]:
    yield "gt", normal_output(alts[0])
    for k, alt in enumerate(alts[1:], 1):
        yield f"gt_alt{k}", normal_output(alt)
    if any(_SUFFIX.search(key) for key in alts[0]):
        yield "suffix_kept", normal_output(alts[0], strip_suffix=False)
    calls = _calls(alts[0])
    if not calls:
        return
    yield from _param_variants(calls, max_params)
    yield from _call_variants(entry, calls)
    yield from _format_variants(calls, normal_output(alts[0]))
    yield from _source_variants(calls)
    yield "non_string_result", [{n: a} for n, a in calls]


def _param_variants(calls: list[tuple[str, dict[str, Any]]], max_params: int) -> Iterator[tuple[str, str]]:
    """The first call with one of its first ``max_params`` parameters changed or dropped."""
    params0 = calls[0][1]
    for p in list(params0)[:max_params]:
        v = params0[p]
        yield f"wrong_value:{p}", render(_with(calls, 0, {**params0, p: wrong_value(v)}))
        yield f"missing_param:{p}", render(_with(calls, 0, {k: x for k, x in params0.items() if k != p}))
        yield f"wrong_type:{p}", render(_with(calls, 0, {**params0, p: _wrong_type(v)}))
        for label, changed in _value_variants(v):
            yield f"{label}:{p}", render(_with(calls, 0, {**params0, p: changed}))


def _value_variants(v: Any) -> Iterator[tuple[str, Any]]:
    """Changes that only apply to a value of ``v``'s type (the borderline ones the checker's rules name)."""
    if isinstance(v, bool):
        yield "bool_string", "true" if v else "false"
    if isinstance(v, int) and not isinstance(v, bool):
        yield "int_as_float", float(v)
    if isinstance(v, float):
        yield "float_as_int", int(v)
    if isinstance(v, str):
        yield "substring_extra", v + " and more"
        yield "prefix_only", v[: max(1, len(v) // 2)]
    if isinstance(v, list) and len(v) > 1:
        yield "list_reordered", v[::-1]
    if isinstance(v, list) and v:
        yield "list_empty", []
    if isinstance(v, dict) and v:
        k = next(iter(v))
        yield "dict_missing_key", {x: y for x, y in v.items() if x != k}
        yield "dict_extra_key", {**v, "zz_extra": "1"}


def _call_variants(entry: Entry, calls: list[tuple[str, dict[str, Any]]]) -> Iterator[tuple[str, str]]:
    """Parameters added or dropped wholesale, the function renamed, calls dropped, reordered, repeated."""
    name0, params0 = calls[0]
    yield "extra_param", render(_with(calls, 0, {**params0, "unexpected_arg": "x"}))
    yield "no_params", render(_with(calls, 0, {}))
    others = [f.get("name") for f in entry.functions if isinstance(f, dict) and f.get("name") != name0]
    wrong = next((o for o in others if isinstance(o, str)), name0 + "_v2")
    yield "wrong_function", render([(wrong, params0)] + calls[1:])
    yield "misspelt_function", render([(name0 + "x", params0)] + calls[1:])
    yield "dotted_function", render([("api." + name0, params0)] + calls[1:])
    if len(calls) > 1:
        yield "drop_last_call", render(calls[:-1])
        yield "drop_first_call", render(calls[1:])
        yield "reordered_calls", render(calls[::-1])
    yield "duplicate_call", render(calls + [calls[0]])
    yield "empty_list", "[]"


def _format_variants(calls: list[tuple[str, dict[str, Any]]], base: str) -> Iterator[tuple[str, str]]:
    """String and number spellings, whitespace and wrappers around the ground truth text ``base``."""
    yield "double_quotes", render(calls, value=_dq)
    for label, is_leaf, f in _LEAF_VARIANTS:
        yield label, render([(n, _map_leaves(a, is_leaf, f)) for n, a in calls])
    yield "newlines_tabs", render(calls, sep=",\n\t", kw=" = ")
    yield "outer_whitespace", "  \n" + base + "\n\t "
    yield "inner_spaces", base.replace("(", " ( ").replace(")", " ) ").replace("=", " = ")
    yield "unicode_space", base.replace(", ", ",\u3000").replace("=", "\u00a0=\u00a0")
    yield "bare_call", base[1:-1]
    yield "tuple_wrapped", "(" + base[1:-1] + ",)"
    yield "code_fence", "```python\n" + base + "\n```"
    yield "prose_prefix", "Sure, here it is: " + base


def _source_variants(calls: list[tuple[str, dict[str, Any]]]) -> Iterator[tuple[str, str]]:
    """Decoder edge cases on the first call's first parameter: positional, a call, ``**``, expressions."""
    name0, params0 = calls[0]
    if not params0:
        return
    first = next(iter(params0))
    text = render([(name0, {k: v for k, v in params0.items() if k != first})] + calls[1:])
    yield "positional_arg", text.replace(f"{name0}(", f"{name0}({params0[first]!r}, ", 1).replace(", )", ")")
    yield "nested_call", _with_source(calls, first, "inner(x=1)")
    yield "kwargs_splat", f"[{name0}(**{params0!r})]"
    yield "binop_value", _with_source(calls, first, "2+3")
    yield "negated_value", _with_source(calls, first, "-5")


def _with_source(calls: list[tuple[str, dict[str, Any]]], param: str, source: str) -> str:
    """The calls rendered with the first call's ``param`` written as the Python source ``source``."""
    params0 = calls[0][1]
    return render(_with(calls, 0, {**params0, param: "__SOURCE__"})).replace("'__SOURCE__'", source)


def special_cases(entry: Entry) -> Iterator[Case]:
    """The expected sentence and phrase/container variants of a special entry."""
    cat, gt = entry.category, entry.ground_truth
    good = special_output(cat, gt)
    yield "gt", good, None
    phrases = ("Missing necessary parameters", "There is incorrect value", "the limitations of the function")
    for ph in phrases:
        if ph in good:
            yield "no_phrase", good.replace(ph, ""), None
            yield "lower_phrase", good.replace(ph, ph.lower()), None
            yield "upper_phrase", good.replace(ph, ph.upper()), None
            yield "only_phrase", ph, None
    if isinstance(gt, dict):
        for name, values in list(gt.items())[:2]:
            if isinstance(name, str) and name and name in good:
                yield "missing_name", good.replace(name, "xx"), None
            for v in (values if isinstance(values, list) else [])[:2]:
                if isinstance(v, str) and v and v in good:
                    yield f"missing_value:{v}"[:60], good.replace(v, "yy"), None
        yield "answer_dump", json.dumps(gt, ensure_ascii=False), None
    yield "whitespace_collapsed", "".join(good.split()), None
    yield "empty", "", None
    yield "list_result", [good], None
    yield "list_of_words", good.split(), None
    yield "none_result", None, None
    yield "int_result", 7, None
    yield "dict_result", {"text": good}, None


def agent_cases(entry: Entry) -> Iterator[Case]:
    """Replayed states and process variants of an agent entry."""
    lists = milestone_lists(entry)
    saved, process = replay_agent(entry, lists[0])
    yield "gt", saved, process
    for k, stones in enumerate(lists[1:], 1):
        s, p = replay_agent(entry, stones)
        yield f"gt_alt{k}", s, p
    half = lists[0][: len(lists[0]) // 2]
    s, p = replay_agent(entry, half)
    yield "half_milestones", s, p
    s, p = replay_agent(entry, lists[0][1:])
    yield "skip_first_milestone", s, p
    s, p = replay_agent(entry, [])
    yield "no_calls", s, p
    yield "gt_states_reversed_process", saved, process[::-1]
    yield "gt_states_empty_process", saved, []
    yield "gt_states_padded_process", saved, ["  " + x + " \n" for x in process]
    yield "gt_states_noisy_process", saved, [y for x in process for y in ("[noise()]", x)]
    yield "reversed_state_order", saved[::-1], process
    if saved:
        yield "drop_last_class", saved[:-1], process
        yield "extra_class", saved + [{"ExtraApi": {}}], process
        cls = next(iter(saved[0]))
        attrs = saved[0][cls]
        if isinstance(attrs, dict) and attrs:
            a0 = next(iter(attrs))
            mod = copy.deepcopy(saved)
            mod[0][cls][a0] = wrong_value(attrs[a0])
            yield "changed_attr", mod, process
            mod = copy.deepcopy(saved)
            mod[0][cls].pop(a0)
            yield "missing_attr", mod, process
            mod = copy.deepcopy(saved)
            mod[0][cls]["zz_extra_attr"] = 1
            yield "extra_attr", mod, process
            for a, v in attrs.items():
                if isinstance(v, dict) and v:
                    mod = copy.deepcopy(saved)
                    k = next(iter(v))
                    mod[0][cls][a][k] = wrong_value(v[k])
                    yield "changed_nested_attr", mod, process
                    mod = copy.deepcopy(saved)
                    mod[0][cls][a]["zz_extra_key"] = 1
                    yield "extra_nested_key", mod, process
                    break
        mod = copy.deepcopy(saved)
        mod[0] = {cls.lower(): mod[0][cls]}
        yield "renamed_class", mod, process
    if saved:
        broken = copy.deepcopy(saved)
        broken.append({"ExtraApi": {}})  # an invalid state, so upstream computes the process share
        yield "process_non_strings", broken, [*process[:1], None, 3, ["x"]]
        yield "process_missing", broken, NO_PROCESS
    yield "states_as_dict", {"BaseApi": {}}, process
    yield "states_as_string", "done", process


_FUZZ_CHARS = "[](){}'\",=.:-_ \n\t`0123456789abcxyzTFN\\é中+/<>;"


def _mutate(text: str, rng: random.Random) -> str:
    return fuzz_text(text, rng, _FUZZ_CHARS)


def fuzz_cases(entries: list[Entry], n: int, rng: random.Random) -> Iterator[tuple[Entry, Case]]:
    """``n`` character-level mutations of ground-truth outputs drawn from ``entries``.

    Normal: the prompt-format string; special: the sentence; agent: one process string and, half of
    the time, one state attribute dropped.
    """
    if not entries:
        return
    for i in range(n):
        e = rng.choice(entries)
        if e.family == "normal":
            alts = _alternatives(e)
            base = normal_output(alts[0]) if alts else "[]"
            yield e, (f"fuzz:{i}", _mutate(base, rng), None)
        elif e.family == "special":
            yield e, (f"fuzz:{i}", _mutate(special_output(e.category, e.ground_truth), rng), None)
        else:
            saved, process = replay_agent(e, milestone_lists(e)[0])
            process = list(process)
            if process:
                j = rng.randrange(len(process))
                process[j] = _mutate(process[j], rng)
            if saved and rng.random() < 0.5:
                saved = copy.deepcopy(saved)
                cls = rng.randrange(len(saved))
                attrs = next(iter(saved[cls].values()))
                if isinstance(attrs, dict) and attrs:
                    attrs.pop(rng.choice(sorted(attrs)))
            yield e, (f"fuzz:{i}", saved, process)
