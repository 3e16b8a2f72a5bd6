"""ACEBench's normal-category checker, rule for rule and quirk for quirk (never raises).

A decoded output is a list of ``{name: {param: value}}``; an answer is ``{name: {param: value}}``
(several calls are several keys; a repeated function carries ``_<n>`` suffixes). ACEBench's rules:

1. **Count**: the number of calls must equal the number of answer keys.
2. **Names**: after stripping ``_\\d+`` suffixes from the answer keys, the multiset of called
   names must equal the multiset of answer names.
3. **Per answer call**, some output call with the same name must pass (calls are not matched
   one-to-one: two answer calls may be satisfied by the same output call). Its description is
   the first function doc whose name is a *substring* of the answer key (so ``get`` shadows
   ``get_weather`` when listed first — a quirk kept as is).
4. **Params**: every required param present; every output param must be in the schema *and* in
   the answer (an optional answer param the output omits is not checked).
5. **Types**: schema types map to Python types (``number`` -> ``int``!). Before comparing, the
   strings ``"true"``/``"false"`` become booleans (so a *string* param whose value is ``"true"``
   fails). If the answer's own type differs from the schema type, the value is a "variable": it
   passes on its type (or equality with the answer) and its value is never checked — this is how
   floats pass for ``number``. Arrays and objects check each item's type only while the answer
   has list items; an empty answer list or dict therefore always fails (upstream quirk).
6. **Values**: strings are standardised (drop `` ,./-_*^``, lowercase, ``'`` -> ``"``) and the
   answer must be a *substring* of the output (exact equality in agent categories); lists of
   scalars: standardised equality; objects: same key count, each key known, nested objects
   recursively, other values by ``str(answer) in str(value)``; arrays of objects: same length and
   the object rule per item. **Quirk**: top-level int/float/bool values are never compared, only
   their types.

Wherever upstream would raise (an unknown schema type, an answer key with no matching function
doc, iterating a non-iterable answer), we return ``valid=False`` with ``error_type`` "checker_error":
the official script would crash on such an entry instead of scoring it.

>>> doc = [{"name": "f", "parameters": {"type": "object", "properties": {"city": {"type": "string"},
...         "n": {"type": "integer"}}, "required": ["city"]}}]
>>> answer = {"f": {"city": "new york", "n": 3}}
>>> normal_check(doc, [{"f": {"city": "NewYorkCity", "n": 999}}], answer, "normal")["valid"]
True
"""

from __future__ import annotations

import re
from typing import Any

TYPE_MAP: dict[str, Any] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
    "list": list,
    "object": dict,
    "objectArray": list,
    "list(string)": list,
    "list(enum)": list,
    "int": int,
    "enum": enumerate,
    "number": int,
}
NESTED_TYPES = ("array", "tuple", "list(string)", "list(enum)", "object", "objectArray")
_SUFFIX = re.compile(r"_\d+$")
_STD = re.compile(r"[ \,\.\/\-\_\*\^]")


class CheckerCrash(Exception):
    """Where ACEBench's own checker would raise; reported as an invalid entry."""


def standardize(s: str) -> str:
    """ACEBench's standardize_string: drop `` ,./-_*^``, lowercase, single -> double quotes."""
    return _STD.sub("", s).lower().replace("'", '"')


def _ok() -> dict[str, Any]:
    return {"valid": True, "error": [], "error_type": ""}


def _fail(error: Any, error_type: str) -> dict[str, Any]:
    return {"valid": False, "error": error if isinstance(error, list) else [error], "error_type": error_type}


def _answer_type(answer: Any) -> type | None:
    return None if answer == "" else type(answer)


def type_check(
    param: str, value: Any, answer: Any, expected: Any, nested: Any, func_name: str
) -> dict[str, Any]:
    """ACEBench's type_checker: returns valid, error, error_type and is_variable."""
    result = {"valid": True, "error": [], "is_variable": False, "error_type": "type_error"}
    answer_type = _answer_type(answer)
    is_variable = answer_type is not None and answer_type != expected
    if type(value) is str:  # upstream: value == "true" -> True, value == "false" -> False
        value = True if value == "true" else False if value == "false" else value
    if type(value) is expected:
        if nested is None:
            result["is_variable"] = is_variable
            return result
        try:
            items = iter(answer)
        except TypeError as e:
            raise CheckerCrash(f"'{type(answer).__name__}' object is not iterable") from e
        for answer_item in items:
            flag = True
            if type(answer_item) is list:
                for value_item in value:
                    if not type_check(param, value_item, answer_item, nested, None, func_name)["valid"]:
                        flag = False
                        break
            if flag:
                return {"valid": True, "error": [], "is_variable": is_variable}
        result["valid"] = False
        result["error"] = [
            (
                f"Nested type checking failed for parameter {param!r}. Expected outer type "
                f"{expected} with inner type {nested}. Parameter value: {value!r}."
            )
        ]
    if answer_type is not None and (type(value) is answer_type or _safe_eq(answer, value)):
        result["is_variable"] = True
        return result
    result["valid"] = False
    result["error"] = [
        f"wrong type for parameter ({param}) of api ({func_name}):[excepted: {expected}, real: {type(value)}]"
    ]
    result["error_type"] = "type_error"
    return result


def _safe_eq(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 (any __eq__ may raise; upstream's comparison then fails)
        return False


def string_check(param: str, value: str, answer: str, func_name: str, category: str) -> dict[str, Any]:
    """Substring match of standardised strings; exact standardised equality for agent categories."""
    out, ans = standardize(value), standardize(answer)
    bad = out != ans if "agent" in category else ans not in out
    if bad:
        return _fail(_mismatch_msg("value", param, func_name, answer, value), "value_error:string")
    return _ok()


def list_check(param: str, value: list, answer: list, func_name: str) -> dict[str, Any]:
    """Element-wise equality after standardising string items (order matters)."""
    out = [standardize(v) if type(v) is str else v for v in value]
    ans = [standardize(v) if type(v) is str else v for v in answer]
    if not _safe_eq(out, ans):
        return _fail(
            f"wrong value for parameter ({param!r}) of api ({func_name}): [expected {answer}, "
            f"real: [{value!r}]]",
            "value_error:list/tuple",
        )
    return _ok()


def dict_check(param: str, value: Any, answer: Any, func_name: str) -> dict[str, Any]:
    """Equal key counts, known keys, nested dicts recursively, others by str-substring."""
    result = {"valid": True, "error": [], "error_type": "dict_checker:unclear"}
    if not isinstance(value, dict):
        return _fail(_mismatch_msg("type", param, func_name, answer, value), "value_error")
    if not isinstance(answer, dict):
        raise CheckerCrash(f"'{type(answer).__name__}' object has no attribute 'keys'")
    if len(value) != len(answer):
        return _fail(_mismatch_msg("value", param, func_name, answer, value), "value_error")
    for key, item in value.items():
        if type(item) is str:
            item = True if item == "true" else False if item == "false" else item
        if key not in answer:
            return _fail(_mismatch_msg("value", param, func_name, answer, value), "value_error")
        expected = answer[key]
        if isinstance(expected, dict):
            result = dict_check(param, item, expected, func_name)
            if not result["valid"]:
                return result
        else:
            std_value = standardize(item) if type(item) is str else item
            std_answer = standardize(expected) if type(expected) is str else expected
            if str(std_answer) not in str(std_value):
                return _fail(_mismatch_msg("value", param, func_name, answer, value), "value_error")
    return result


def _mismatch_msg(what: str, param: str, func_name: str, answer: Any, value: Any) -> str:
    """Upstream's wording (its typo included) for a parameter whose value or type is wrong."""
    return f"wrong {what} for parameter ({param}) of api ({func_name}): [excepted: {answer}, real: [{value}]]"


def list_dict_check(param: str, value: list, answer: Any, func_name: str) -> dict[str, Any]:
    """Arrays of objects: equal length, then :func:`dict_check` item by item."""
    result = {"valid": True, "error": [], "error_type": "list_dict_checker:unclear"}
    try:
        n_answer = len(answer)
    except TypeError as e:
        raise CheckerCrash(str(e)) from e
    if len(value) != n_answer:
        return _fail(_mismatch_msg("value", param, func_name, answer, value), "value_error:list_dict_count")
    for i in range(len(value)):
        result = dict_check(param, value[i], answer[i], func_name)
        if not result["valid"]:
            return result
    return result


def _length(x: Any) -> int:
    try:
        return len(x)
    except TypeError as e:
        raise CheckerCrash(str(e)) from e


def find_description(docs: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The first doc whose name is a substring of ``name`` (ACEBench's lookup, quirk included).

    A doc reached before the match that has no string name makes upstream raise: CheckerCrash.
    """
    for doc in docs:
        if not isinstance(doc, dict) or "name" not in doc:
            raise CheckerCrash(f"a function doc without a name: {str(doc)[:80]}")
        doc_name = doc["name"]
        if not isinstance(doc_name, str):
            raise CheckerCrash(
                f"'in <string>' requires string as left operand, not {type(doc_name).__name__}"
            )
        if doc_name in name:
            return doc
    return None


def simple_function_check(
    doc: dict[str, Any] | None, call: dict[Any, Any], answer: dict[str, Any], category: str
) -> dict[str, Any]:
    """Check one output call against one answer call (ACEBench's simple_function_checker)."""
    if doc is None:
        raise CheckerCrash("'NoneType' object is not subscriptable (no function doc for the answer)")
    if "parameters" not in doc:
        raise CheckerCrash("KeyError: 'parameters'")
    params_doc = doc["parameters"]
    answer_params = next(iter(answer.values()))
    call_params = next(iter(call.values()))
    if call_params == {} and params_doc == {}:
        return _ok()
    if call_params == {} or params_doc == {}:
        return {"valid": False, "error": [], "error_type": "wrong_param"}
    if not isinstance(params_doc, dict) or "properties" not in params_doc:
        raise CheckerCrash("KeyError: 'properties'")
    if answer_params == params_doc["properties"]:
        return _ok()
    if answer_params == {}:
        return {"valid": False, "error": [], "error_type": "wrong_param"}
    func_name = doc.get("name")
    if func_name not in call:
        return _fail(
            {"wrong_function": {"expected": func_name, "real": next(iter(call))}}, "wrong_function_name"
        )
    properties = params_doc["properties"]
    if "required" not in params_doc:
        raise CheckerCrash("KeyError: 'required'")
    for param in params_doc["required"]:
        try:
            missing = param not in call_params
        except TypeError as e:
            raise CheckerCrash(str(e)) from e
        if missing:
            return {"valid": False, "error": f"lack required_params: {param}", "error_type": "lack_args"}
    if not isinstance(call_params, dict):
        raise CheckerCrash(f"'{type(call_params).__name__}' object has no attribute 'items'")
    for param, value in call_params.items():
        if param not in properties or param not in answer_params:
            return {"valid": False, "error": f"addition params: {param}", "error_type": "addition_args"}
        result = _param_check(param, value, properties[param], answer_params, func_name, category)
        if not result["valid"]:
            return {"valid": False, "error": result["error"], "error_type": result["error_type"]}
    return _ok()


def _schema_types(param: str, detail: Any) -> tuple[str, Any, Any]:
    """(schema type name, its Python type, the Python type of its items or None), as upstream maps them."""
    type_name = detail.get("type") if isinstance(detail, dict) else None
    if not isinstance(type_name, str) or type_name not in TYPE_MAP:
        raise CheckerCrash(f"KeyError: {type_name!r} (schema type of {param!r})")
    if type_name not in NESTED_TYPES:
        return type_name, TYPE_MAP[type_name], None
    items = detail.get("items")
    if isinstance(items, dict) and "type" in items:
        nested_name = items["type"]  # even null: upstream then fails the type lookup
    else:
        nested_name = "string" if "string" in type_name else "enum" if "enum" in type_name else "dict"
    if not isinstance(nested_name, str) or nested_name not in TYPE_MAP:
        raise CheckerCrash(f"KeyError: {nested_name!r} (item type of {param!r})")
    return type_name, TYPE_MAP[type_name], TYPE_MAP[nested_name]


def _param_check(
    param: str, value: Any, detail: Any, answer_params: Any, func_name: str, category: str
) -> dict[str, Any]:
    """One output parameter: its type, then (unless it is a "variable") its value."""
    type_name, expected, nested = _schema_types(param, detail)
    answer = answer_params[param]  # read after the schema lookups, as upstream does
    if type_name == "tuple" and type(value) is tuple:
        value = list(value)
    if type_name == "float" and type(value) is int:
        value = float(value)
    checked = type_check(param, value, answer, expected, nested, func_name)
    if not checked["valid"] or checked["is_variable"]:
        return checked
    if expected is dict:
        return dict_check(param, value, answer, func_name)
    if expected is list and nested is dict:
        if type_name == "objectArray":
            if len(value) != _length(answer):
                return _fail("Wrong number of parameters for dictionary.", "value_error:dict_items")
            if value:  # upstream calls dict_checker with a missing argument on the first item
                raise CheckerCrash("dict_checker() missing 1 required positional argument: 'func_name'")
        return list_dict_check(param, value, answer, func_name)
    if expected is str:
        return string_check(param, value, answer, func_name, category)
    if expected is list:
        return list_check(param, value, answer, func_name)
    return _ok()


def _count(names: Any) -> dict[Any, int]:
    out: dict[Any, int] = {}
    for n in names:
        out[n] = out.get(n, 0) + 1
    return out


def _normal_check(
    docs: list[dict[str, Any]], calls: list[dict[Any, Any]], answer: dict[str, Any], category: str
) -> dict[str, Any]:
    if len(calls) != _length(answer):  # upstream compares lengths before reading the answer's keys
        return _fail("The number of functions does not match the answer.", "wrong functions number")
    if not isinstance(answer, dict):
        raise CheckerCrash(f"answer must be an object, got {type(answer).__name__}")
    answer_calls = [{_SUFFIX.sub("", k): v} for k, v in answer.items()]
    answer_keys = list(answer)
    out_names = _count(k for c in calls for k in c)
    ans_names = _count(k for c in answer_calls for k in c)
    for name in out_names:
        if name not in ans_names:
            return _fail(f"extra function detected: {name} is not in the ground truth", "function_mismatch")
    for name in ans_names:
        if name not in out_names:
            return _fail(f"extra function detected: {name} is not in the ground truth", "function_mismatch")
    for name, count in out_names.items():
        if count != ans_names[name]:
            return _fail(
                f"incorrect count for function {name}: [expected: {ans_names[name]}, actual: {count}]",
                "function_mismatch",
            )
    result = _ok()
    for i, answer_call in enumerate(answer_calls):
        doc = find_description(docs, answer_keys[i])
        answer_name = next(iter(answer_call))
        for call in calls:
            if next(iter(call)) == answer_name:
                result = simple_function_check(doc, call, answer_call, category)
                if result["valid"]:
                    break
            else:
                result = _fail("wrong_function", "simple_function_checker:unclear")
        if not result["valid"]:
            return result
    return result


def normal_check(docs: list[dict[str, Any]], calls: Any, answer: Any, category: str) -> dict[str, Any]:
    """ACEBench's normal_checker on decoded calls against ONE answer dict. Never raises."""
    try:
        if not isinstance(calls, list) or not all(isinstance(c, dict) and c for c in calls):
            return _fail("The output format does not meet the specified requirements.", "wrong_output_format")
        return _normal_check(docs, calls, answer, category)
    except CheckerCrash as e:
        return _fail(f"the official checker raises on this entry: {e}", "checker_error")
    except RecursionError:
        return _fail("the official checker raises on this entry: RecursionError", "checker_error")


def check_alternatives(docs: list[dict[str, Any]], calls: Any, answers: Any, category: str) -> dict[str, Any]:
    """Try each alternative answer (a list of answer dicts, or one dict); valid if any passes.

    On failure the first alternative's error is reported, as upstream does.
    """
    alternatives = answers if isinstance(answers, list) else [answers]
    first = None
    for answer in alternatives:
        result = normal_check(docs, calls, answer, category)
        if result["valid"]:
            return result
        first = first or result
    return first or _fail("no answer to compare with", "checker_error")
