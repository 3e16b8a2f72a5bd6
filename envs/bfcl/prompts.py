"""What a BFCL-v3 model is shown: the prompting-format system prompt or FC tool schemas.

Both start from BFCL's language hints (a note on the syntax, Java/JavaScript parameters described
as strings). The prompting format lists the docs in BFCL's default system prompt; the FC format
gives OpenAI-style tools with dots in names written as underscores and BFCL types mapped to JSON
Schema types, the way BFCL compiles tools for FC models.

>>> tools = fc_tools([{"name": "a.b", "description": "d", "parameters": {"type": "dict",
...     "properties": {"x": {"type": "float", "description": "x"}}, "required": ["x"]}}], "simple")
>>> tools[0]["name"], tools[0]["parameters"]["properties"]["x"]["type"]
('a_b', 'number')
"""

from __future__ import annotations

import copy
import json
from typing import Any

SYSTEM_PROMPT = (
    "You are an expert in composing functions. You are given a question and a set of possible functions. "
    "Based on the question, you will need to make one or more function/tool calls to achieve the purpose.\n"
    "If none of the functions can be used, point it out. If the given question lacks the parameters required "
    "by the function, also point it out.\nYou should only return the function calls in your response.\n\n"
    "If you decide to invoke any of the function(s), you MUST put it in the format of "
    "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]\n"
    "You SHOULD NOT include any other text in the response.\n\n"
    "At each turn, you should try your best to complete the tasks requested by the user within the current "
    "turn. Continue to output functions to call until you have fulfilled the user's request to the best of "
    "your ability. Once you have no more functions to call, the system will consider the current turn "
    "complete and proceed to the next turn or task.\n"
    "\nHere is a list of functions in JSON format that you can invoke.\n{functions}\n\n"
)
"""BFCL's default system prompt for prompting-format models (text of the benchmark)."""
ADDED_FUNCTIONS_MESSAGE = "I have updated some more functions you can choose from. What about now?"
"""The user message of a withheld-function turn (FC; the prompting format puts the docs first)."""

OPENAPI_TYPES = {
    "integer": "integer", "number": "number", "float": "number", "string": "string", "boolean": "boolean",
    "bool": "boolean", "array": "array", "list": "array", "dict": "object", "object": "object",
    "tuple": "array", "any": "string", "byte": "integer", "short": "integer", "long": "integer",
    "double": "number", "char": "string", "ArrayList": "array", "Array": "array", "HashMap": "object",
    "Hashtable": "object", "Queue": "array", "Stack": "array", "Any": "string", "String": "string",
    "Bigint": "integer",
}


def _hint(category: str) -> str:
    if category == "java":
        return " Note that the provided function is in Java 8 SDK syntax."
    if category == "javascript":
        return " Note that the provided function is in JavaScript syntax."
    return " Note that the provided function is in Python 3 syntax."


def language_docs(functions: list[dict[str, Any]], category: str) -> list[dict[str, Any]]:
    """Docs with BFCL's language hints (Java/JavaScript parameters re-described as strings)."""
    docs = copy.deepcopy(functions)
    lang = "Java" if category == "java" else "JavaScript" if category == "javascript" else None
    for item in docs:
        item["description"] = item.get("description", "") + _hint(category)
        if lang is None:
            continue
        for spec in item.get("parameters", {}).get("properties", {}).values():
            t = spec.get("type")
            obj = "Java" if lang == "Java" else "JavaScript"
            note = (f" This parameter can be of any type of {obj} object in string representation." if t == "any"
                    else f" This is {obj} {t} type parameter in string representation.")
            spec["description"] = spec.get("description", "") + note
            if t in (("ArrayList", "Array") if lang == "Java" else ("array",)) and "items" in spec:
                spec["description"] += (f" The list elements are of type {spec['items'].get('type')}; "
                                        "they are not in string representation.")
                del spec["items"]
            if lang == "JavaScript" and t == "dict" and "properties" in spec:
                spec["description"] += (" The dictionary entries have the following schema; they are not in "
                                        f"string representation. {json.dumps(spec['properties'])}")
                del spec["properties"]
            spec["type"] = "string"
    return docs


def _openapi_properties(props: dict[str, Any]) -> dict[str, Any]:
    for spec in props.values():
        t = spec.get("type")
        if t is None:
            spec["type"] = "string"
        else:
            if t == "float":
                spec["format"] = "float"
                spec["description"] = spec.get("description", "") + " This is a float type value."
            spec["type"] = OPENAPI_TYPES.get(t, "string")
        if spec["type"] in ("array", "object"):
            if "properties" in spec:
                spec["properties"] = _openapi_properties(spec["properties"])
            elif isinstance(spec.get("items"), dict):
                items = spec["items"]
                items["type"] = OPENAPI_TYPES.get(items.get("type", "string"), "string")
                if items["type"] == "array" and isinstance(items.get("items"), dict):
                    items["items"]["type"] = OPENAPI_TYPES.get(items["items"].get("type", "string"), "string")
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = _openapi_properties(items["properties"])
    return props


def fc_tools(functions: list[dict[str, Any]], category: str) -> list[dict[str, Any]]:
    """OpenAI-style function schemas as BFCL compiles them for FC models."""
    tools = []
    for item in language_docs(functions, category):
        item["name"] = item["name"].replace(".", "_")
        params = item.setdefault("parameters", {})
        params["type"] = "object"
        params["properties"] = _openapi_properties(params.get("properties", {}))
        tools.append(item)
    return tools


def prompt_system(functions: list[dict[str, Any]], category: str) -> str:
    """BFCL's prompting-format system prompt with the (language-hinted) docs."""
    return SYSTEM_PROMPT.format(functions=language_docs(functions, category))


def added_functions_message(docs: list[dict[str, Any]], fmt: str) -> str:
    """The user message of a withheld-function turn."""
    return ADDED_FUNCTIONS_MESSAGE if fmt == "fc" else f"{docs}\n{ADDED_FUNCTIONS_MESSAGE}"
