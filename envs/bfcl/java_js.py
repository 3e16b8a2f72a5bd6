"""BFCL's Java and JavaScript call parsers for the prompting format, rebuilt on tree-sitter.

BFCL parses ``func(arg=value)`` text (the outer brackets removed) with tree-sitter's Java or
JavaScript grammar and turns each argument back into *source text*; the checker later converts that
text per declared type (``envs.bfcl.convert``). We use the same grammar releases as bfcl-eval
2025.8.6.2 (tree-sitter-java 0.21.0, tree-sitter-javascript 0.21.4) so the trees are the same.

Behaviour reproduced: any ERROR node fails the parse; Java returns only the first method invocation
(pre-order) and ``{}`` when there is none, JavaScript the first top-level call and ``None``;
Java string/char literals lose their quotes at the top level only; Java text is sliced by *byte*
offsets from the Python string (as upstream does, so non-ASCII text shifts); compound values are
the concatenated text of their tokens (whitespace dropped), ``new T[]{...}`` and ``new T(args)``
rebuilt; JavaScript values are raw text with one pair of matching quotes removed; repeated
argument names fail.

>>> parse_java_call('Foo.bar(a="x", b=mapArea)')
[{'Foo.bar': {'a': 'x', 'b': 'mapArea'}}]
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

from envs.bfcl.errors import DecodeError

_local = threading.local()


def _parser(lang: str) -> Any:
    parsers = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    if lang not in parsers:
        import tree_sitter

        if lang == "java":
            import tree_sitter_java as grammar
        else:
            import tree_sitter_javascript as grammar
        with warnings.catch_warnings():  # the 0.21 grammars hand over an int pointer
            warnings.simplefilter("ignore", DeprecationWarning)
            language = tree_sitter.Language(grammar.language())
        parsers[lang] = tree_sitter.Parser(language)
    return parsers[lang]


def _has_error(root: Any) -> bool:
    cursor = root.walk()
    while True:
        node = cursor.node
        if node.type == "ERROR":
            return True
        if node.has_error and cursor.goto_first_child():
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return False


def _parse(lang: str, source: str) -> Any:
    try:
        data = source.encode("utf-8")
    except UnicodeEncodeError as e:  # lone surrogates: upstream's bytes() raises too
        raise DecodeError(f"cannot encode source: {e}") from None
    tree = _parser(lang).parse(data)
    if _has_error(tree.root_node):
        raise DecodeError(f"error parsing the {lang} source code")
    return tree.root_node


def _add_argument(out: dict[Any, str], key: Any, val: str) -> None:
    """``out[key] = val``; a repeated name (unnamed ones included) fails, as upstream's parsers do."""
    if key in out:
        raise DecodeError("multiple arguments with the same name are not supported")
    out[key] = val


# ---- Java -----------------------------------------------------------------------------------


def parse_java_call(source: str) -> Any:
    """Parse Java-syntax call text into ``[{name: {param: text}}]`` (``{}`` if no call)."""
    root = _parse("java", source)
    try:
        found = _find_java_call(source, root)
    except RecursionError:
        raise DecodeError("java source nested too deeply") from None
    return found if found else {}


def _java_text(source: str, node: Any) -> str:
    return source[node.start_byte : node.end_byte]  # byte offsets into the str, as upstream slices


def _java_value_text(source: str, node: Any, nested: bool = False) -> str:
    t = node.type
    if t in ("string_literal", "character_literal"):
        return _java_text(source, node) if nested else _java_text(source, node)[1:-1]
    if t in ("identifier", "class_literal", "type_identifier", "method_invocation"):
        return _java_text(source, node)
    if t == "array_creation_expression":
        type_node, value_node = node.child_by_field_name("type"), node.child_by_field_name("value")
        if type_node is None or value_node is None:
            raise DecodeError("array creation without a type or initializer")
        return (
            f"new {_java_value_text(source, type_node, True)}[]{_java_value_text(source, value_node, True)}"
        )
    if t == "object_creation_expression":
        type_node = node.child_by_field_name("type")
        if type_node is None:
            raise DecodeError("object creation without a type")
        args = node.child_by_field_name("arguments")
        if args is None:
            return f"new {_java_value_text(source, type_node, True)}()"
        parts = [_java_value_text(source, c, True) for c in args.children if c.type not in (",", "(", ")")]
        return f"new {_java_value_text(source, type_node, True)}({', '.join(parts)})"
    if t == "set":
        items = [_java_value_text(source, c, True) for c in node.children if c.type not in (",", "set")]
        return "{" + ", ".join(items) + "}"
    if node.child_count > 0:
        return "".join(_java_value_text(source, c, True) for c in node.children)
    return _java_text(source, node)


def _java_arguments(source: str, args_node: Any) -> dict[Any, str]:
    out: dict[Any, str] = {}
    for child in args_node.children:
        if child.type == "assignment_expression":
            key = _java_text(source, child.children[0])
            _add_argument(out, key, _java_value_text(source, child.children[2]))
        elif child.type in ("identifier", "class_literal", "set"):
            _add_argument(out, None, _java_value_text(source, child))
    return out


def _find_java_call(source: str, node: Any) -> Any:
    """The first method invocation in pre-order, as ``[{name: args}]`` (None when it has no arguments)."""
    if node.type == "method_invocation":
        name = _java_text(source, node.child_by_field_name("name"))
        obj = node.child_by_field_name("object")
        if obj is not None:
            name = f"{_java_text(source, obj)}.{name}"
        args_node = node.child_by_field_name("arguments")
        if args_node is not None:
            return [{name: _java_arguments(source, args_node)}]
        return None
    for child in node.children:
        found = _find_java_call(source, child)
        if found:
            return found
    return None


# ---- JavaScript -----------------------------------------------------------------------------


def parse_js_call(source: str) -> Any:
    """Parse JavaScript call text into ``[{name: {param: text}}]`` (None if no call)."""
    root = _parse("javascript", source)
    if root.type != "program":
        return None
    for child in root.children:
        if child.type != "expression_statement":
            continue
        for sub in child.children:
            if sub.type != "call_expression":
                continue
            name = sub.children[0].text.decode("utf-8")
            return [{name: _js_arguments(sub.children[1])}]
    return None


def _js_arguments(args_node: Any) -> dict[Any, str]:
    """``k=v`` arguments with one pair of matching quotes removed from ``v``; bare ones under None."""
    out: dict[Any, str] = {}
    for arg in args_node.children:
        if arg.type == "assignment_expression":
            key = arg.children[0].text.decode("utf-8")
            val = arg.children[2].text.decode("utf-8")
            if (val.startswith('"') and val.endswith('"')) or (val.startswith("'") and val.endswith("'")):
                val = val[1:-1]
            _add_argument(out, key, val)
        elif arg.type in ("identifier", "true"):
            _add_argument(out, None, arg.text.decode("utf-8"))
    return out
