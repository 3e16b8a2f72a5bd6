"""BFCL v3 single-turn AST checker: our implementation of the official rules (bfcl-eval 2025.8.6.2).

``check_ast(functions, decoded, answer, language, category, underscore_names)`` returns a
:class:`Verdict`. The rules, in the official order:

* routing by category name: ``parallel*`` -> order-free matching with equal counts (greedy: each
  answer call takes the first unmatched output call that passes); ``multiple*`` -> exactly one call,
  checked against the answer's function; anything else -> exactly one call against the first doc;
* per call: the (possibly underscored) name must be a key of the call; every required parameter
  present; each given parameter must be in the schema *and* in the answer; Java/JavaScript values
  must be strings and are converted per declared type (``envs.bfcl.convert``); Python ints pass for
  floats and tuples become lists; type check with one level of nesting for arrays; when the
  answer's values have another type than the schema's, the value is a "variable": it passes on that
  type and skips the structural checks; strings are standardised (spaces and ``,./-_*^`` removed,
  lower case, ``'`` -> ``"``) and must equal an allowed value; lists compare element-wise after
  standardising strings (order matters); dicts key by key; lists of dicts in order; anything else
  must be in the allowed list (Python ``==``, so ``1 == 1.0``); an answer parameter the output
  omits fails unless ``""`` is allowed.

>>> fn = [{"name": "f", "parameters": {"type": "dict", "properties": {"x": {"type": "string"}},
...        "required": ["x"]}}]
>>> check_ast(fn, [{"f": {"x": "New York"}}], [{"f": {"x": ["new york"]}}], "Python", "simple").valid
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from envs.bfcl.convert import JAVA_TYPES, JS_TYPES, java_value, js_value

PYTHON_TYPES: dict[str, type] = {
    "string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list,
    "dict": dict, "any": str,
}
_NESTED_PY = ("array", "tuple")
_NESTED_CONVERTED = ("Array", "ArrayList", "array")
_STANDARDISE = re.compile(r"[ \,\.\/\-\_\*\^]")


@dataclass(slots=True)
class Verdict:
    """The checker's answer for one entry (``error_type`` uses BFCL's names)."""

    valid: bool
    error_type: str = ""
    error: list[Any] = field(default_factory=list)
    is_variable: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "error_type": self.error_type, "error": self.error}


OK = Verdict(True)


def _fail(kind: str, msg: Any) -> Verdict:
    return Verdict(False, kind, [msg])


def standardize(s: str) -> str:
    """BFCL's string standardisation."""
    return _STANDARDISE.sub("", s).lower().replace("'", '"')


def underscore_name(name: str) -> str:
    """How FC models write a dotted function name."""
    return name.replace(".", "_")


def _answer_type(allowed: Any) -> type | None:
    for a in allowed:
        if a != "":
            return type(a)
    return None


def _type_check(param: str, value: Any, allowed: Any, type_desc: str, expected: type,
                nested: type | None) -> Verdict:
    answer_type = _answer_type(allowed)
    is_variable = answer_type is not None and answer_type != expected
    nested_failed = False
    if type(value) == expected:
        if nested is None:
            return Verdict(True, is_variable=is_variable)
        for item in allowed:
            ok = True
            if type(item) == list:
                for v in value:
                    if not _type_check(param, v, item, str(nested), nested, None).valid:
                        ok = False
                        break
            if ok:
                return Verdict(True, is_variable=is_variable)
        nested_failed = True
    if answer_type is not None and type(value) == answer_type:
        if nested_failed:  # upstream returns its already-failed result here
            return _fail("type_error:nested",
                         f"Nested type checking failed for parameter {param!r}. Expected outer type "
                         f"{type_desc} with inner type {nested}. Parameter value: {value!r}.")
        return Verdict(True, is_variable=True)
    return _fail("type_error:simple",
                 f"Incorrect type for parameter {param!r}. Expected type {type_desc}, got "
                 f"{type(value).__name__}. Parameter value: {value!r}.")


def _string_check(param: str, value: str, allowed: list) -> Verdict:
    wanted = [standardize(a) for a in allowed if type(a) == str]
    if standardize(value) not in wanted:
        return _fail("value_error:string", f"Invalid value for parameter {param!r}: {value!r}. "
                                           f"Expected one of {allowed}. Case insensitive.")
    return OK


def _std_item(x: Any) -> Any:
    return standardize(x) if type(x) == str else x


def _list_check(param: str, value: list, allowed: list) -> Verdict:
    got = [_std_item(x) for x in value]
    wanted = [[_std_item(x) for x in a] for a in allowed]
    if got not in wanted:
        return _fail("value_error:list/tuple",
                     f"Invalid value for parameter {param!r}: {value!r}. Expected one of {allowed}.")
    return OK


def _dict_check(param: str, value: dict, allowed: list) -> Verdict:
    result = Verdict(False, "dict_checker:unclear")
    for answer in allowed:
        if answer == "":
            continue
        result = Verdict(False, "dict_checker:unclear")
        ok = True
        for key, v in value.items():
            if key not in answer:
                result = _fail("value_error:dict_key", f"Unexpected dict key parameter: '{key}'.")
                ok = False
                break
            options = [_std_item(a) for a in answer[key]]
            if _std_item(v) not in options:
                result = _fail("value_error:dict_value",
                               f"Invalid value for parameter {key!r}: {v!r}. Expected one of {options}.")
                ok = False
                break
        for key, options in answer.items():
            if key not in value and "" not in options:
                result = _fail("value_error:dict_key", f"Missing dict key parameter: '{key}'.")
                ok = False
                break
        if ok:
            return OK
    return result


def _list_dict_check(param: str, value: list, allowed: list) -> Verdict:
    result = Verdict(False, "list_dict_checker:unclear")
    for answer in allowed:
        if len(value) != len(answer):
            result = _fail("value_error:list_dict_count", "Wrong number of dictionaries in the list.")
            continue
        ok = True
        for i in range(len(value)):
            result = _dict_check(param, value[i], [answer[i]])
            if not result.valid:
                ok = False
                break
        if ok:
            return OK
    return result


def check_call(doc: dict[str, Any], output: dict[str, Any], answer: dict[str, Any], language: str,
               underscore_names: bool = False) -> Verdict:
    """Check one output call ``{name: {param: value}}`` against one answer ``{name: {param: [..]}}``."""
    allowed_by_param = next(iter(answer.values()))
    name = doc["name"]
    props = doc["parameters"]["properties"]
    required = doc["parameters"]["required"]
    if underscore_names and "." in name:
        name = underscore_name(name)
    if name not in output:
        return _fail("simple_function_checker:wrong_func_name", f"Function name {name!r} not found in model output.")
    params = output[name]
    for p in required:
        if p not in params:
            return _fail("simple_function_checker:missing_required", f"Missing required parameter: {p!r}.")
    for p, value in params.items():
        if p not in props or p not in allowed_by_param:
            return _fail("simple_function_checker:unexpected_param", f"Unexpected parameter: {p!r}.")
        allowed = allowed_by_param[p]
        type_desc = props[p]["type"]
        nested: type | None = None
        if language == "Java" or language == "JavaScript":
            table, convert = (JAVA_TYPES, java_value) if language == "Java" else (JS_TYPES, js_value)
            expected = table[type_desc]
            if type(value) != str:
                kind = "type_error:java" if language == "Java" else "type_error:js"
                return _fail(kind, f"Incorrect type for parameter {p!r}. Expected type String, got "
                                   f"{type(value).__name__}. Parameter value: {value!r}.")
            if type_desc in _NESTED_CONVERTED:
                nested_desc = props[p]["items"]["type"]
                nested = table[nested_desc]
                value = convert(value, type_desc, nested_desc)
            else:
                value = convert(value, type_desc)
        else:
            expected = PYTHON_TYPES[type_desc]
            if type_desc in _NESTED_PY:
                nested = PYTHON_TYPES[props[p]["items"]["type"]]
        if type_desc == "tuple" and type(value) == tuple:
            value = list(value)
        if language == "Python" and type_desc == "float" and type(value) == int:
            value = float(value)
        tc = _type_check(p, value, allowed, type_desc, expected, nested)
        if not tc.valid:
            return tc
        if not tc.is_variable:
            if expected == dict:
                r = _dict_check(p, value, allowed)
                if not r.valid:
                    return r
                continue
            if expected == list and nested == dict:
                r = _list_dict_check(p, value, allowed)
                if not r.valid:
                    return r
                continue
            if expected == str:
                r = _string_check(p, value, allowed)
                if not r.valid:
                    return r
                continue
            if expected == list:
                r = _list_check(p, value, allowed)
                if not r.valid:
                    return r
                continue
        if value not in allowed:
            return _fail("value_error:others",
                         f"Invalid value for parameter {p!r}: {value!r}. Expected one of {allowed}.")
    for p, allowed in allowed_by_param.items():
        if p not in params and "" not in allowed:
            return _fail("simple_function_checker:missing_optional",
                         f"Optional parameter {p!r} not provided and not marked as optional.")
    return OK


def _find_doc(docs: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    for d in docs:
        if d["name"] == name:
            return d
    return None


def _parallel(docs: list, output: list, answers: list, language: str, underscore: bool) -> Verdict:
    if len(output) != len(answers):
        return _fail("parallel_function_checker_no_order:wrong_count", "Wrong number of functions.")
    matched: set[int] = set()
    for i, answer in enumerate(answers):
        doc = _find_doc(docs, next(iter(answer)))
        if doc is None:
            raise LookupError(f"answer function {next(iter(answer))!r} has no doc")
        errors: list[Any] = []
        found = False
        for j, call in enumerate(output):
            if j in matched:
                continue
            r = check_call(doc, call, answer, language, underscore)
            if r.valid:
                matched.add(j)
                found = True
                break
            errors.append({f"Model Result Index {j}": {"sub_error": r.error, "sub_error_type": r.error_type}})
        if not found:
            left = [k for k in range(len(output)) if k not in matched]
            errors.insert(0, f"Could not find a matching function among index {left} of model output "
                             f"for index {i} of possible answers.")
            return Verdict(False, "parallel_function_checker_no_order:cannot_find_match", errors)
    return OK


def check_ast(functions: list[dict[str, Any]], decoded: list[dict[str, Any]], answer: list[dict[str, Any]],
              language: str, category: str, underscore_names: bool = False) -> Verdict:
    """Check decoded calls against an entry's possible answers (routing by category name).

    ``underscore_names``: the output writes dotted function names with underscores (FC models).
    Raises only where the official checker raises on this input (callers turn that into a failure).
    """
    if "parallel" in category:
        return _parallel(functions, decoded, answer, language, underscore_names)
    if "multiple" in category:
        if len(decoded) != len(answer):
            return _fail("multiple_function_checker:wrong_count", "Wrong number of functions.")
        doc = _find_doc(functions, next(iter(answer[0])))
        if doc is None:
            raise LookupError(f"answer function {next(iter(answer[0]))!r} has no doc")
        return check_call(doc, decoded[0], answer[0], language, underscore_names)
    if len(decoded) != 1:
        return _fail("simple_function_checker:wrong_count", "Wrong number of functions.")
    return check_call(functions[0], decoded[0], answer[0], language, underscore_names)
