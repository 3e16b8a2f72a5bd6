"""ACEBench's special-category checks: fixed phrases in the raw model output (never raises).

- ``special_incomplete`` (answer ``{api: [missing params]}``): the output must contain
  "Missing necessary parameters", then the API name, then every missing param name.
- ``special_error_param`` (answer ``{param: [wrong values]}``): the output must contain
  "There is incorrect value" and every wrong value.
- ``special_irrelevant``: the output must contain "the limitations of the function".

Quirks kept: matching is plain, case-sensitive substring search on the *raw* output (no
whitespace removal); the answer's param names are used verbatim, stray spaces included (one
English answer lists ``" rentalManagement "``); the last failing check names the error. Upstream
applies ``in`` to whatever the result is, so a non-string result is searched as a container (a
list matches only whole items); a result that supports no ``in`` (a number, null) would crash
upstream and is invalid here.

>>> special_check("special_irrelevant", "Due to the limitations of the function, I cannot.", "...")["valid"]
True
>>> special_check("special_incomplete", 'Missing necessary parameters (city) for the api (get_weather)',
...               {"get_weather": ["city", "date"]})["error_type"]
'error_correction'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

INCOMPLETE_PHRASE = "Missing necessary parameters"
ERROR_PHRASE = "There is incorrect value"
IRRELEVANT_PHRASE = "the limitations of the function"


def _check_of(category: str) -> str:
    """Which check a category gets, by upstream's substring tests in upstream's order ("" for none)."""
    for check in ("incomplete", "error", "irrelevant"):
        if check in category:
            return check
    return ""


_CHECKS = {c: _check_of(c) for c in ("special_incomplete", "special_error_param", "special_irrelevant")}


def special_check(category: str, result: Any, answer: Any) -> dict[str, Any]:
    """Verdict {valid, error, error_type} for one special entry."""
    failure = special_failure(category, result, answer)
    if failure is None:
        return {"valid": True, "error": [], "error_type": ""}
    return {"valid": False, "error": [failure[0]], "error_type": failure[1]}


def special_failure(category: str, result: Any, answer: Any) -> tuple[str, str] | None:
    """None when the entry passes, else (error message, error_type): :func:`special_check`, lean.

    Upstream keeps checking after a failure (a later check may crash it, and the last failing check
    names the error), so every check runs.
    """
    failure = None
    try:
        check = _CHECKS[category]
    except KeyError:
        check = _check_of(category)
    try:  # `in` on an unsupported result, or iterating bad answer values, raises upstream: checker_error
        if check == "incomplete":
            failure = _phrase_and_values(answer, result, INCOMPLETE_PHRASE, _missing_msg, per_param=True)
        elif check == "error":
            failure = _phrase_and_values(answer, result, ERROR_PHRASE, _wrong_msg, per_param=False)
        elif check == "irrelevant":
            if IRRELEVANT_PHRASE not in result:
                failure = IRRELEVANT_MSG, "error_detection"
        else:
            failure = f"not a special category: {category}", "checker_error"
    except (_Crash, TypeError) as e:
        return f"the official checker raises on this output: {e}", "checker_error"
    return failure


def _phrase_and_values(
    answer: Any, result: Any, phrase: str, message: Callable[[Any, Any], str], per_param: bool
) -> tuple[str, str] | None:
    """Upstream's loop over ``{name: values}``: the phrase, then each value, must be in the result.

    ``per_param`` (special_incomplete) also wants the name itself and names each missing value
    alone; special_error_param cites all of an entry's values. The last failing entry wins.
    """
    if type(answer) is not dict:
        raise _Crash(f"'{type(answer).__name__}' object has no attribute 'items'")
    failure = None
    for name, values in answer.items():
        if phrase not in result:
            failure = message(values, name), "error_detection"
        elif per_param and name not in result:
            failure = message(values, name), "error_correction"
        else:
            for value in values:
                if value not in result:
                    failure = message(value if per_param else values, name), "error_correction"
    return failure


IRRELEVANT_MSG = "The model cannot solve this problem, due to the limitations of the function"


def _missing_msg(values: Any, name: Any) -> str:
    return (
        f"The user's instruction is missing necessary parameters ({values}) for the ({name}), "
        "but the model failed to correctly point it out"
    )


def _wrong_msg(values: Any, name: Any) -> str:
    return (
        f"The user's instruction contains incorrect values ({values}) of the parameters ({name}), "
        "but the model failed to correctly point it out"
    )


class _Crash(Exception):
    pass
