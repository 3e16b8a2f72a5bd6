from typing import Annotated, Literal

from envs.tools import ToolSet, check_arguments, function_schema, parse_docstring, tool


@tool
def search(query: str, limit: int = 5, kinds: list[str] | None = None,
           order: Literal["asc", "desc"] = "asc") -> list:
    """Search the catalogue.

    Longer description line.

    Args:
        query: Words to look for.
        limit: Most results to return;
            wraps onto a second line.
        kinds: Optional filters.
        order: Sort order.

    Returns:
        The matches.
    """
    return [query] * limit


def test_schema_from_types_and_docstring():
    fn = search.schema["function"]
    assert search.schema["type"] == "function"
    assert fn["name"] == "search"
    assert fn["description"] == "Search the catalogue.\n\nLonger description line."
    props = fn["parameters"]["properties"]
    assert props["query"] == {"type": "string", "description": "Words to look for."}
    assert props["limit"] == {"type": "integer", "description": "Most results to return; wraps onto a second line.",
                              "default": 5}
    assert props["kinds"] == {"type": "array", "items": {"type": "string"}, "description": "Optional filters."}
    assert props["order"]["enum"] == ["asc", "desc"]
    assert fn["parameters"]["required"] == ["query"]


def test_annotated_descriptions_and_methods():
    class Box:
        def __init__(self):
            self.items = []

        @tool(name="put")
        def put_item(self, item: Annotated[str, "What to store"]) -> int:
            """Store an item."""
            self.items.append(item)
            return len(self.items)

    box = Box()
    ts = ToolSet.from_object(box)
    assert ts.names == ["put"]
    assert ts.schemas[0]["function"]["parameters"]["properties"]["item"] == {"type": "string",
                                                                           "description": "What to store"}
    assert ts.call("put", {"item": "a"}).content == "1"
    assert box.items == ["a"]


def test_call_errors_never_raise():
    def boom(x: int) -> int:
        """Explode."""
        raise RuntimeError("kaput")

    ts = ToolSet([search, boom])
    r = ts.call("nope", {})
    assert r.error == "unknown_tool" and "Available tools: search, boom" in r.content
    assert ts.call("search", {"q": 1}).error == "bad_arguments"
    assert "unknown argument(s) for search: q" in ts.call("search", {"q": 1, "query": "x"}).content
    assert "missing required argument(s) for search: query" in ts.call("search", {}).content
    assert "must be an integer, got bool" in ts.call("search", {"query": "x", "limit": True}).content
    assert "argument 'kinds' of search[1] must be a string" in ts.call("search", {"query": "x", "kinds": ["a", 2]}).content
    assert "must be one of ['asc', 'desc']" in ts.call("search", {"query": "x", "order": "up"}).content
    r = ts.call("boom", {"x": 1})
    assert r.error == "tool_raised" and r.content == "Error: boom raised RuntimeError: kaput"
    assert ts.call("search", {"query": "ok", "limit": 2}).content == '["ok", "ok"]'


def test_results_are_capped():
    def big() -> str:
        """Big."""
        return "x" * 100

    r = ToolSet([big], max_result_chars=10).call("big", None)
    assert r.content.startswith("x" * 10) and "truncated 90 chars" in r.content


def test_number_accepts_int_and_null_type_and_anyof():
    schema = function_schema(lambda a, b=None: None)
    assert schema["function"]["parameters"]["required"] == ["a"]
    s = {"function": {"name": "f", "parameters": {"properties": {"n": {"type": "number"},
                                                                 "u": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}}}
    assert check_arguments(s, {"n": 3, "u": 4}) is None
    assert "matches none" in check_arguments(s, {"u": 1.5})


def test_parse_docstring_edge_cases():
    assert parse_docstring(None) == ("", {})
    assert parse_docstring("Only a line.") == ("Only a line.", {})


def test_a_tool_without_docstring_or_annotation_is_an_error_at_definition_naming_it():
    import pytest

    with pytest.raises(TypeError, match=r"@tool lookup: no docstring"):
        @tool
        def lookup(city: str) -> str:
            return city

    with pytest.raises(TypeError, match=r"@tool fetch: parameter\(s\) city, n have no type annotation"):
        @tool(name="fetch")
        def get(city, n=1, *args, **kwargs) -> str:
            """Fetch a city."""
            return city

    class Tools:
        @tool
        def ok(self, city: str, *rest: str) -> str:  # self and *args need no annotation
            """Say the city."""
            return city

    assert Tools.ok.schema["function"]["description"] == "Say the city."
