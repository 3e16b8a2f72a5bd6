"""Java and JavaScript value conversion as BFCL's AST checker does it.

For Java/JavaScript entries every argument must be a *string* (its source text); the checker turns it
into a Python value per the declared type, falling back to the string itself when it does not match
that type's pattern. The patterns and fallbacks below follow bfcl-eval 2025.8.6.2 exactly, odd corners
included: a Java ``char`` pattern that can never match, ``String`` elements of a Java array keeping
their quotes, JavaScript dicts split by a regex, 2-D JavaScript arrays parsed loosely.

>>> java_value("new ArrayList<>(Arrays.asList(1, 2))", "ArrayList", "integer")
[1, 2]
>>> js_value("{a: 1, b: 'x'}", "dict")
{'a': 1, 'b': 'x'}
"""

from __future__ import annotations

import re
from typing import Any

JAVA_TYPES: dict[str, type] = {
    "byte": int, "short": int, "integer": int, "float": float, "double": float, "long": int,
    "boolean": bool, "char": str, "Array": list, "ArrayList": list, "Set": set, "HashMap": dict,
    "Hashtable": dict, "Queue": list, "Stack": list, "String": str, "any": str,
}
JS_TYPES: dict[str, type] = {
    "String": str, "integer": int, "float": float, "Bigint": int, "Boolean": bool, "dict": dict,
    "array": list, "any": str,
}

_INT = re.compile(r"^-?\d+$")
_JAVA_FLOAT = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$")
_JAVA_DOUBLE = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")
_JAVA_LONG = re.compile(r"^-?\d+[lL]$")
_JAVA_CHAR = re.compile(r"^\'.$\'")  # upstream's pattern; it cannot match, so chars stay strings
_SUFFIX_F = re.compile(r"[fF]$")
_SUFFIX_L = re.compile(r"[lL]$")


class ConversionNotSupported(ValueError):
    """The declared type has no converter upstream (upstream raises here too)."""


def java_value(value: str, type_name: str, nested: str | None = None) -> Any:
    """Convert Java source text per a declared Java type."""
    if type_name not in JAVA_TYPES:
        raise ConversionNotSupported(f"Unsupported type: {type_name}")
    if type_name in ("byte", "short", "integer"):
        return int(value) if _INT.match(value) else str(value)
    if type_name == "float":
        return float(_SUFFIX_F.sub("", value)) if _JAVA_FLOAT.match(value) else str(value)
    if type_name == "double":
        return float(value) if _JAVA_DOUBLE.match(value) else str(value)
    if type_name == "long":
        return int(_SUFFIX_L.sub("", value)) if _JAVA_LONG.match(value) else str(value)
    if type_name == "boolean":
        return value == "true" if value in ("true", "false") else str(value)
    if type_name == "char":
        return value if _JAVA_CHAR.match(value) else str(value)
    if type_name == "ArrayList":
        return _java_arraylist(value, nested)
    if type_name == "Array":
        return _java_array(value, nested)
    if type_name == "HashMap":
        return _java_hashmap(value)
    if type_name in ("String", "any"):
        return str(value)
    raise ConversionNotSupported(f"{type_name} conversion is not implemented")


def _java_element(text: str, nested: str | None) -> Any:
    if nested in ("char", "String"):
        return text[1:-1]  # strip the quotes, whatever they are
    return java_value(text, nested) if nested else java_literal(text)


def _java_arraylist(text: str, nested: str | None) -> Any:
    m = re.search(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)", text)
    if m:
        return [_java_element(part.strip(), nested) for part in m.group(1).split(",")]
    m = re.search(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", text, re.DOTALL)
    if m:
        return [_java_element(part.strip(), nested) for part in re.findall(r"add\((.+?)\)", m.group(1))]
    if re.search(r"new\s+ArrayList<\w*>\(\)", text):
        return []
    return text


def _java_array(text: str, nested: str | None) -> Any:
    m = re.search(r"new\s+\w+\[\]\s*\{(.*?)\}", text)
    if not m:
        return text
    parts = [p.strip() for p in m.group(1).split(",") if p.strip()]
    return [java_value(p, nested) if nested else java_literal(p) for p in parts]


def _java_hashmap(text: str) -> Any:
    m = re.search(r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}", text, re.DOTALL)
    if m:
        out = {}
        if m.group(1).strip():
            for key, val in re.findall(r"put\(\"(.*?)\",\s*(.*?)\)", m.group(1)):
                out[key] = java_literal(val.strip())
        return out
    if re.search(r"new\s+HashMap<.*?>\s*\(\)", text):
        return {}
    return text


def java_literal(text: str) -> Any:
    """A Java literal without a declared type: bool, quoted string, long, float, int, double, else text."""
    if text == "true":
        return True
    if text == "false":
        return False
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    if _JAVA_LONG.match(text):
        return int(text[:-1])
    if _JAVA_FLOAT.match(text):
        return float(_SUFFIX_F.sub("", text))
    return _int_float_or_text(text)


def _int_float_or_text(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


# ---- JavaScript -----------------------------------------------------------------------------

_JS_FLOAT = re.compile(r"^-?\d+(\.\d+)?$")
_JS_BIGINT = re.compile(r"^-?\d+n$")
_JS_2D = re.compile(r"\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\)")
_JS_1D = re.compile(r"\[(.*?)\]|\bnew\s+Array\((.*?)\)")
_JS_PAIR = re.compile(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)")


def js_value(value: str, type_name: str, nested: str | None = None) -> Any:
    """Convert JavaScript source text per a declared JavaScript type."""
    if type_name not in JS_TYPES:
        raise ConversionNotSupported(f"Unsupported type: {type_name}")
    if type_name == "String":
        quoted = (value.startswith('"') and value.endswith('"')) or (value.startswith("'") and value.endswith("'"))
        return value[1:-1] if quoted else str(value)
    if type_name == "integer":
        return int(value) if _INT.match(value) else str(value)
    if type_name == "float":
        return float(value) if _JS_FLOAT.match(value) else str(value)
    if type_name == "Bigint":
        return int(value[:-1]) if _JS_BIGINT.match(value) else str(value)
    if type_name == "Boolean":
        return value == "true" if value in ("true", "false") else str(value)
    if type_name == "dict":
        return _js_dict(value)
    if type_name == "array":
        return _js_array(value, nested)
    return str(value)  # any


def _js_array(code: str, nested: str | None) -> Any:
    code = code.strip()
    try:
        m2 = _JS_2D.match(code)
        if m2:
            rows = []
            for idx, inner in enumerate(re.findall(r"\[(.*?)\]", m2.group(0))):
                inner = inner.strip()
                if idx == 0 and inner.startswith("["):
                    inner = inner[1:]
                rows.append([js_literal(e.strip()) for e in inner.split(",")])
            return rows
        m = _JS_1D.match(code)
        if not m:
            return code
        body = m.group(1) if m.group(1) is not None else m.group(2)
        body = (body or "").strip()
        parts = body.split(",") if body else []
        if nested:
            out = []
            for e in parts:
                e = e.strip()
                # upstream passes "String" as the nested type of the element here; it is unused
                out.append(js_value(e, nested, "String") if e.startswith(("'", '"')) else js_value(e, nested))
            return out
        return [js_literal(e.strip()) for e in parts]
    except Exception:  # upstream falls back to the raw text on any failure
        return code


def _js_dict(code: str) -> Any:
    code = code.strip()
    if code == "{}":
        return {}
    m = re.match(r"\{(.*?)\}", code)
    if not m:
        return code
    try:
        out: dict[str, Any] = {}
        for key, val in _JS_PAIR.findall(m.group(1)):
            key = key.strip().strip("'\"")
            val = val.strip()
            if val.startswith("[") and val.endswith("]"):
                out[key] = _js_array(val, None)
            elif val.startswith("{") and val.endswith("}"):
                out[key] = _js_dict(val)
            else:
                out[key] = js_literal(val.strip("'\""))
        return out
    except Exception:
        return code


def js_literal(text: str) -> Any:
    """A JavaScript literal without a declared type: bool, quoted string, int, float, else text."""
    text = text.strip()
    if text == "true":
        return True
    if text == "false":
        return False
    if (text.startswith('"') and text.endswith('"')) or (text.startswith("'") and text.endswith("'")):
        return text[1:-1]
    return _int_float_or_text(text)
