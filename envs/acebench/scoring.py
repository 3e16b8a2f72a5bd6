"""Per-entry verdicts, per-category accuracies and ACEBench's summary table.

Entry verdicts (never raise):

- normal: :func:`verdict_normal` decodes the raw output (prompt format; or FC calls, which are
  first rendered to the prompt string so the same whitespace rule applies) and tries each answer.
- special: :func:`verdict_special` runs the phrase checks on the raw output.
- agent: :func:`verdict_agent` compares saved class states; the process share comes with it.

Category accuracies follow ``eval_main.py``: normal single-turn ``round(correct/total, 3)``;
normal multi-turn groups consecutive ids by their dialogue number (``..._<dialogue>_<turn>``)
and reports the share of dialogues with every turn valid (end accuracy) and the mean rounded
share of valid turns (process accuracy), both rounded; special ``correct/total`` unrounded; agent
``round(correct/total, 3)`` with the process mean rounded. The summary averages sub-categories
without weights (rounded to 3) and combines them as
``0.2676 * special + 0.578 * normal + 0.1545 * agent`` (rounded to 3); a missing category counts 0.

>>> summary({"normal_atom_bool": CategoryScore("normal_atom_bool", 1.0, 50, 50)})["normal_summary"]
0.083
"""

from __future__ import annotations

import textwrap
from dataclasses import asdict, dataclass
from typing import Any

from envs.acebench.agent_checker import ProcessCrash, agent_state_check, process_accuracy
from envs.acebench.data import AGENT_CATEGORIES, NORMAL_CATEGORIES, SPECIAL_CATEGORIES, Entry, family_of
from envs.acebench.decode import decode_fc, decode_prompt, is_call_list
from envs.acebench.normal_checker import check_alternatives
from envs.acebench.special_checker import special_failure

WEIGHTS = {"special": 0.2676, "normal": 0.578, "agent": 0.1545}
NO_PROCESS: Any = object()
"""The ``process`` of a result line that has none (upstream raises when it needs it)."""


@dataclass(slots=True)
class Verdict:
    """One entry's verdict, as ``lopd score --out`` writes it."""

    id: str
    category: str
    valid: bool
    error_type: str = ""
    error: Any = None
    process: float | None = None
    """Agent only: the process accuracy this entry adds to its category."""

    def row(self) -> dict[str, Any]:
        d = asdict(self)
        if d["process"] is None:
            d.pop("process")
        return d


def fc_to_prompt(calls: list[dict[Any, Any]]) -> str:
    """Render FC calls ``[{name: args}]`` as ACEBench's prompt string ``[name(k=v, ...)]``."""
    parts = []
    for call in calls:
        for name, args in call.items():
            body = ", ".join(f"{k}={v!r}" for k, v in (args.items() if isinstance(args, dict) else []))
            parts.append(f"{name}({body})")
    return "[" + ", ".join(parts) + "]"


def verdict_normal(entry: Entry, result: Any, fc: bool = False) -> Verdict:
    """Normal-category verdict for one raw output.

    A string is decoded as ACEBench decodes prompt-format outputs. With ``fc``, a non-string result
    is read as FC calls ``[{name: json-args}]`` and rendered to the prompt string first; without it
    a non-string fails to decode, as it does upstream.
    """
    if fc and not isinstance(result, str):
        fc_decoded = decode_fc(result)
        if not fc_decoded.ok:
            return Verdict(entry.id, entry.category, False, "wrong_output_format", [fc_decoded.error])
        result = fc_to_prompt(fc_decoded.calls)
    decoded = decode_prompt(result)
    if not decoded.ok:
        return Verdict(entry.id, entry.category, False, "wrong_output_format", [decoded.error])
    if not is_call_list(decoded.calls):
        return Verdict(
            entry.id,
            entry.category,
            False,
            "wrong_output_format",
            ["The output format does not meet the specified requirements."],
        )
    r = check_alternatives(entry.functions, decoded.calls, entry.ground_truth, entry.category)
    return Verdict(
        entry.id, entry.category, bool(r["valid"]), "" if r["valid"] else r["error_type"], r["error"] or None
    )


def verdict_special(entry: Entry, result: Any) -> Verdict:
    failure = special_failure(entry.category, result, entry.ground_truth)
    if failure is None:
        return Verdict(entry.id, entry.category, True)
    return Verdict(entry.id, entry.category, False, failure[1], [failure[0]])


def verdict_agent(entry: Entry, states: Any, process: Any) -> Verdict:
    """Agent verdict; ``process`` is :data:`NO_PROCESS` when the result line has none."""
    r = agent_state_check(states, entry.ground_truth)
    share = 1.0
    if not r["valid"]:  # upstream reads the process of failed entries only
        try:
            if process is NO_PROCESS:
                raise ProcessCrash("KeyError: 'process'")
            share = process_accuracy(process, entry.mile_stone)
        except ProcessCrash as e:
            return Verdict(
                entry.id,
                entry.category,
                False,
                "checker_error",
                [f"the official checker raises on this entry's process: {e}"],
                0.0,
            )
    return Verdict(
        entry.id,
        entry.category,
        bool(r["valid"]),
        r["error_type"] if not r["valid"] else "",
        r["error"] or None,
        share,
    )


def verdict(entry: Entry, row: dict[str, Any] | None, fc: bool = False) -> Verdict:
    """Verdict for one result row ``{id, result[, process]}`` (None: the row is missing)."""
    try:
        result = row["result"]  # type: ignore[index]
    except (KeyError, TypeError):
        missing = row is None
        return Verdict(
            entry.id,
            entry.category,
            False,
            "missing_result" if missing else "wrong_output_format",
            ["no result line for this id" if missing else "the result line has no 'result'"],
            0.0 if entry.family == "agent" else None,
        )
    fam = entry.family
    if fam == "special":  # verdict_special, inlined: a special entry is checked in about a microsecond
        failure = special_failure(entry.category, result, entry.ground_truth)
        if failure is None:
            return Verdict(entry.id, entry.category, True)
        return Verdict(entry.id, entry.category, False, failure[1], [failure[0]])
    if fam == "normal":
        return verdict_normal(entry, result, fc)
    return verdict_agent(entry, result, row.get("process", NO_PROCESS))  # type: ignore[union-attr]


@dataclass
class CategoryScore:
    """A category's accuracy as ACEBench reports it."""

    category: str
    accuracy: float
    correct: int
    total: int
    process_accuracy: float | None = None


def category_score(category: str, verdicts: list[Verdict], entry_ids: list[str]) -> CategoryScore:
    """Accuracy of one category from its verdicts (in data order)."""
    total = len(verdicts)
    correct = sum(v.valid for v in verdicts)
    fam = family_of(category)
    if total == 0:
        return CategoryScore(category, 0.0, 0, 0, 0.0 if fam == "agent" else None)
    if fam == "special":
        return CategoryScore(category, correct / total, correct, total)
    if fam == "agent":
        proc = round(sum(v.process or 0.0 for v in verdicts) / total, 3)
        return CategoryScore(category, round(correct / total, 3), correct, total, proc)
    if "multi_turn" in category:
        groups: list[tuple[str, list[bool]]] = []
        for eid, v in zip(entry_ids, verdicts):
            dialogue = eid.split("_")[-2]
            if groups and groups[-1][0] == dialogue:
                groups[-1][1].append(v.valid)
            else:
                groups.append((dialogue, [v.valid]))
        end = round(sum(all(g) for _, g in groups) / len(groups), 3)
        proc = round(sum(round(sum(g) / len(g), 3) for _, g in groups) / len(groups), 3)
        return CategoryScore(category, end, correct, total, proc)
    return CategoryScore(category, round(correct / total, 3), correct, total)


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 3) if values else 0.0


def summary(scores: dict[str, CategoryScore]) -> dict[str, float]:
    """ACEBench's summary columns from category scores (missing categories count 0)."""
    acc = {
        c: (scores[c].accuracy if c in scores else 0.0)
        for c in NORMAL_CATEGORIES + SPECIAL_CATEGORIES + AGENT_CATEGORIES
    }
    proc = {c: (scores[c].process_accuracy or 0.0) if c in scores else 0.0 for c in AGENT_CATEGORIES}
    atoms = [c for c in NORMAL_CATEGORIES if "atom" in c]
    out = {
        **{c.removeprefix("normal_atom_"): acc[c] for c in atoms},
        "atom": _mean([acc[c] for c in atoms]),
        "single_turn_single_function": acc["normal_single_turn_single_function"],
        "single_turn_parallel_function": acc["normal_single_turn_parallel_function"],
        "single_turn": _mean(
            [acc["normal_single_turn_single_function"], acc["normal_single_turn_parallel_function"]]
        ),
        "multi_turn_user_switch": acc["normal_multi_turn_user_switch"],
        "multi_turn_user_adjust": acc["normal_multi_turn_user_adjust"],
        "multi_turn": _mean([acc["normal_multi_turn_user_switch"], acc["normal_multi_turn_user_adjust"]]),
        "similar_api": acc["normal_similar_api"],
        "preference": acc["normal_preference"],
        "normal_summary": _mean([acc[c] for c in NORMAL_CATEGORIES]),
        "incomplete": acc["special_incomplete"],
        "error_param": acc["special_error_param"],
        "irrelevant": acc["special_irrelevant"],
        "special_summary": _mean([acc[c] for c in SPECIAL_CATEGORIES]),
        "agent_multi_turn": acc["agent_multi_turn"],
        "agent_multi_turn_process": proc["agent_multi_turn"],
        "agent_multi_step": acc["agent_multi_step"],
        "agent_multi_step_process": proc["agent_multi_step"],
        "agent_summary": _mean([acc[c] for c in AGENT_CATEGORIES]),
    }
    out["summary"] = round(
        WEIGHTS["special"] * out["special_summary"]
        + WEIGHTS["normal"] * out["normal_summary"]
        + WEIGHTS["agent"] * out["agent_summary"],
        3,
    )
    return out


def summary_parts() -> dict[str, tuple[str, ...]]:
    """The categories each key of :func:`summary` averages (a key none of whose categories ran is
    upstream's 0, not a score)."""
    atoms = tuple(c for c in NORMAL_CATEGORIES if "atom" in c)
    parts: dict[str, tuple[str, ...]] = {c.removeprefix("normal_atom_"): (c,) for c in atoms}
    parts["atom"] = atoms
    for c in NORMAL_CATEGORIES:
        if c not in atoms:
            parts[c.removeprefix("normal_")] = (c,)
    parts["single_turn"] = tuple(c for c in NORMAL_CATEGORIES if "single_turn" in c)
    parts["multi_turn"] = tuple(c for c in NORMAL_CATEGORIES if "multi_turn" in c)
    parts["normal_summary"] = NORMAL_CATEGORIES
    parts.update({c.removeprefix("special_"): (c,) for c in SPECIAL_CATEGORIES})
    parts["special_summary"] = SPECIAL_CATEGORIES
    for c in AGENT_CATEGORIES:
        parts[c] = parts[c + "_process"] = (c,)
    parts["agent_summary"] = AGENT_CATEGORIES
    parts["summary"] = NORMAL_CATEGORIES + SPECIAL_CATEGORIES + AGENT_CATEGORIES
    return parts


def format_summary(values: dict[str, Any], ran: set[str] | list[str], digits: int = 3) -> str:
    """``key  value`` lines of :func:`summary`'s numbers for the keys whose categories ``ran`` (any of
    them; the rest count 0 in the totals, as upstream), then one line naming the keys not run."""
    parts = summary_parts()
    shown = [k for k in values if k in parts and set(parts[k]) & set(ran)]
    width = max([len(k) for k in shown] + [1])
    lines = [f"{k:<{width}}  {values[k]:.{digits}f}" for k in shown]
    not_run = [k for k in values if k in parts and k not in shown]
    if not_run:
        lines += textwrap.wrap(f"not run (0 in the totals, as upstream): {', '.join(not_run)}", 100,
                               subsequent_indent="  ")
    return "\n".join(lines)
