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
    valid, error, kind = special_verdict(category, result, answer)
    return {"valid": valid, "error": [error] if error else [], "error_type": kind}


def special_verdict(category: str, result: Any, answer: Any) -> tuple[bool, str, str]:
    """(valid, error message or "", error_type) for one special entry: :func:`special_check` as a tuple."""
    valid, error, kind = True, "", ""
    check = _CHECKS.get(category) or _check_of(category)
    try:  # `in` on an unsupported result, or iterating bad answer values, raises upstream: checker_error
        if check == "incomplete":
            if type(answer) is not dict:
                raise _Crash(f"'{type(answer).__name__}' object has no attribute 'items'")
            for name, values in answer.items():
                if INCOMPLETE_PHRASE not in result or name not in result:
                    valid = False
                    kind = "error_detection" if INCOMPLETE_PHRASE not in result else "error_correction"
                    error = _missing_msg(values, name)
                else:
                    for value in values:
                        if value not in result:
                            valid, kind, error = False, "error_correction", _missing_msg(value, name)
        elif check == "error":
            if type(answer) is not dict:
                raise _Crash(f"'{type(answer).__name__}' object has no attribute 'items'")
            for name, values in answer.items():
                if ERROR_PHRASE not in result:
                    valid, kind, error = False, "error_detection", _wrong_msg(values, name)
                else:
                    for value in values:
                        if value not in result:
                            valid, kind, error = False, "error_correction", _wrong_msg(values, name)
        elif check == "irrelevant":
            if IRRELEVANT_PHRASE not in result:
                valid, kind = False, "error_detection"
                error = "The model cannot solve this problem, due to the limitations of the function"
        else:
            valid, kind, error = False, "checker_error", f"not a special category: {category}"
    except (_Crash, TypeError) as e:
        return False, f"the official checker raises on this output: {e}", "checker_error"
    return valid, error, kind


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
