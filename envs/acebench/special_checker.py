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


def _contains(container: Any, item: Any) -> bool:
    try:
        return item in container
    except TypeError as e:
        raise _Crash(str(e)) from e


class _Crash(Exception):
    pass


def special_check(category: str, result: Any, answer: Any) -> dict[str, Any]:
    """Verdict {valid, error, error_type} for one special entry."""
    out: dict[str, Any] = {"valid": True, "error": [], "error_type": ""}

    def fail(msg: str, kind: str) -> None:
        out.update(valid=False, error=[msg], error_type=kind)

    try:
        if "incomplete" in category:
            for name, values in _items(answer):
                if not _contains(result, INCOMPLETE_PHRASE):
                    fail(
                        f"The user's instruction is missing necessary parameters ({values}) for the "
                        f"({name}), "
                        "but the model failed to correctly point it out",
                        "error_detection",
                    )
                elif not _contains(result, name):
                    fail(
                        f"The user's instruction is missing necessary parameters ({values}) for the "
                        f"({name}), "
                        "but the model failed to correctly point it out",
                        "error_correction",
                    )
                else:
                    for value in values:
                        if not _contains(result, value):
                            fail(
                                f"The user's instruction is missing necessary parameters ({value}) for the "
                                f"({name}), but the model failed to correctly point it out",
                                "error_correction",
                            )
        elif "error" in category:
            for name, values in _items(answer):
                if not _contains(result, ERROR_PHRASE):
                    fail(
                        f"The user's instruction contains incorrect values ({values}) of the parameters "
                        f"({name}), "
                        "but the model failed to correctly point it out",
                        "error_detection",
                    )
                else:
                    for value in values:
                        if not _contains(result, value):
                            fail(
                                f"The user's instruction contains incorrect values ({values}) of the "
                                "parameters "
                                f"({name}), but the model failed to correctly point it out",
                                "error_correction",
                            )
        elif "irrelevant" in category:
            if not _contains(result, IRRELEVANT_PHRASE):
                fail(
                    "The model cannot solve this problem, due to the limitations of the function",
                    "error_detection",
                )
        else:
            fail(f"not a special category: {category}", "checker_error")
    except (_Crash, TypeError) as e:
        return {
            "valid": False,
            "error": [f"the official checker raises on this output: {e}"],
            "error_type": "checker_error",
        }
    return out


def _items(answer: Any) -> list[tuple[Any, Any]]:
    if not isinstance(answer, dict):
        raise _Crash(f"'{type(answer).__name__}' object has no attribute 'items'")
    return list(answer.items())
