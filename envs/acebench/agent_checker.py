"""ACEBench's agent verdicts: end-to-end state accuracy and process accuracy (never raise).

End-to-end (upstream ``agent_eval`` + ``agent_checker``), quirks kept:

- The number of saved class dicts must equal the number of answer dicts.
- Each answer dict is matched with the first saved dict that has the same class name. When none
  has it, the *previous* comparison's verdict is reused (valid when it is the first), so an
  answer whose class name is misspelt upstream (``ReminderAPI``, ``Reminderpi``, ``BaseAPI`` occur
  in the data) is never compared.
- Only attributes present in the saved dict are compared (so a missing attribute is not an
  error, an extra one is); dict-valued answer attributes are compared key by key for the
  answer's keys only, other values by equality.

Process accuracy (upstream ``agent_eval_process``): 1.0 for an end-to-end success; otherwise
the share of milestone calls found, in order, as a subsequence of the model's executed call
messages (compared after ``strip``); the search never goes back, so a milestone that is not
found uses up the rest of the messages and no later one can match. With several alternative
milestone lists the best rounded share counts; with one list the unrounded share counts. The
category mean is rounded to 3 places.

>>> saved = [{"BaseApi": {"wifi": True}}]
>>> agent_state_check(saved, [{"BaseApi": {"wifi": True, "logged_in": False}}])["valid"]
True
>>> round(process_accuracy(["[a()]", "[x()]", "[b()]"], ["[a()]", "[b()]", "[c()]"]), 3)
0.667
"""

from __future__ import annotations

from typing import Any


def _compare_class(saved: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"valid": True, "error": [], "error_type": "class attributes wrong"}
    scenario = next(iter(answer))
    expected_attrs = answer[scenario]
    saved_attrs = next(iter(saved.values()))
    if not isinstance(saved_attrs, dict) or (saved_attrs and not isinstance(expected_attrs, dict)):
        # upstream calls .items() on the state; with no attributes saved nothing is compared
        return {
            "valid": False,
            "error": ["the official checker raises on this entry: state is not an object"],
            "error_type": "checker_error",
        }
    for attr, value in saved_attrs.items():
        if attr not in expected_attrs:
            result["valid"] = False
            result["error"].append(f"class({scenario}) attributes({attr}) missing in possible_answer.")
            continue
        expected = expected_attrs[attr]
        try:
            if isinstance(expected, dict):
                for key, want in expected.items():
                    if key not in value:
                        result["valid"] = False
                        result["error"].append(
                            f"class({scenario}) attributes({attr}) wrong, [expected: {expected}, "
                            f"real: {value}]"
                        )
                    elif want != value[key]:
                        result["valid"] = False
                        result["error"].append(
                            f"class({scenario}) attributes({attr}.{key}) wrong, [expected: "
                            f"{want}, real: {value[key]}]"
                        )
            elif expected != value:
                result["valid"] = False
                result["error"].append(
                    f"class({scenario}) attributes({attr}) wrong, [expected: {expected}, real: {value}]"
                )
        except (TypeError, KeyError, IndexError) as e:
            return {
                "valid": False,
                "error": [f"the official checker raises on this entry: {e}"],
                "error_type": "checker_error",
            }
    return result


def _crash(what: str) -> dict[str, Any]:
    return {
        "valid": False,
        "error": [f"the official checker raises on this entry: {what}"],
        "error_type": "checker_error",
    }


def agent_state_check(saved: Any, answer: Any) -> dict[str, Any]:
    """End-to-end verdict {valid, error, error_type} of saved class states against the answer.

    A result that is not a list is judged the way upstream's loop treats it: a sized value of
    another length is "wrong number of class"; anything else would crash upstream (checker_error).
    """
    answers = answer if isinstance(answer, list) else [answer]
    out: dict[str, Any] = {"valid": True, "error": [], "error_type": ""}
    try:
        n_saved = len(saved)
    except TypeError:
        return _crash(f"object of type '{type(saved).__name__}' has no len()")
    if len(answers) != n_saved:
        out.update(valid=False, error_type="wrong number of class")
        return out
    if not isinstance(saved, list):  # upstream iterates it: keys of a dict, characters of a string
        return _crash("a state is not a {class: attributes} object")
    last: dict[str, Any] = {"valid": True}
    for expected in answers:
        if not isinstance(expected, dict):
            return _crash("bad answer")
        n_keys = len(expected)
        match = None
        for s in saved:  # upstream stops at the first match and calls .keys() on every state before it
            if type(s) is not dict:
                return _crash("a state is not a {class: attributes} object")
            if len(s) == n_keys:  # set(s) == set(expected) without building sets: same size, all known
                for k in s:
                    if k not in expected:
                        break
                else:
                    match = s
                    break
        if match:  # an empty state matches nothing here (upstream tests its truth value)
            last = _compare_class(match, expected)
        if not last["valid"]:
            out["valid"] = False
            out["error"].append(last["error"])
            out["error_type"] = last["error_type"]
    return out


class ProcessCrash(Exception):
    """Where upstream's process accuracy raises (and takes the whole category file down with it)."""


def _subsequence_share(process: Any, milestones: Any) -> float:
    """Share of ``milestones`` found in order in ``process``; raises ProcessCrash where upstream raises
    (a process item or milestone that is not a string, a process without len() or indexing)."""
    try:
        n = len(process)
        found, pos = 0, 0
        for stone in milestones:
            while pos < n:
                item = process[pos]
                pos += 1
                if item.strip() == stone.strip():
                    found += 1
                    break
        return found / len(milestones) if len(milestones) else 1.0
    except (TypeError, AttributeError, KeyError, IndexError) as e:
        raise ProcessCrash(f"{type(e).__name__}: {e}") from None


def process_accuracy(process: Any, mile_stone: Any) -> float:
    """One failed entry's process accuracy, as upstream adds it to the category total.

    Several milestone lists: the best share rounded to 3 places; one list: the unrounded share.
    Raises :class:`ProcessCrash` where upstream raises: an empty or missing mile_stone, or a process
    item reached by the search that is not a string.
    """
    try:
        several = isinstance(mile_stone[0], list)
    except (TypeError, IndexError, KeyError) as e:
        raise ProcessCrash(f"{type(e).__name__}: {e}") from None
    if several:
        return max(round(_subsequence_share(process, s), 3) for s in mile_stone)
    return _subsequence_share(process, mile_stone)
