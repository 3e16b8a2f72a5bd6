"""Synthetic ACEBench normal entries for schema and decoder edge cases the staged data never reaches.

The agreement check (``benchmarks/acebench_official_agreement.py``) writes these entries as a small
data folder (``data_en/data_<category>.json`` plus ``possible_answer/``), scores the listed outputs
with the official evaluator and with ours, and compares. Each item is ``(question_line, answer_line,
[(label, output), ...])`` in the staged data's line format; which verdict each output should get is
decided by the official evaluator, not here.

>>> items = synthetic_items()
>>> all(q["id"] == a["id"] for q, a, _ in items)
True
"""

from __future__ import annotations

from typing import Any

CATEGORY = "normal_single_turn_single_function"


def _doc(name: Any, props: Any, required: Any = (), **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"type": "object", "properties": props}
    if required is not None:
        params["required"] = list(required)
    return {"name": name, "description": "synthetic", "parameters": params, **extra}


S = {"type": "string"}
I = {"type": "integer"}  # noqa: E741

# (functions, ground truth, [(label, output)])
_SPECS: list[tuple[list[dict], Any, list[tuple[str, Any]]]] = [
    (
        [_doc("f", {"items": {"type": "objectArray"}}, ["items"])],
        {"f": {"items": [{"a": "x"}, {"a": "y"}]}},
        [
            ("object_array_same", "[f(items=[{'a': 'x'}, {'a': 'y'}])]"),
            ("object_array_shorter", "[f(items=[{'a': 'x'}])]"),
            ("object_array_empty", "[f(items=[])]"),
            ("object_array_not_list", "[f(items='x')]"),
        ],
    ),
    (
        [_doc("f", {"items": {"type": "objectArray"}}, ["items"])],
        {"f": {"items": []}},
        [("object_array_empty_answer", "[f(items=[])]")],
    ),
    (
        [_doc("f", {"t": {"type": "tuple", "items": {"type": "integer"}}}, ["t"])],
        {"f": {"t": [1, 2]}},
        [
            ("tuple_value", "[f(t=(1, 2))]"),
            ("tuple_as_list", "[f(t=[1, 2])]"),
            ("tuple_wrong", "[f(t=(2, 1))]"),
        ],
    ),
    (
        [_doc("f", {"x": {"type": "float"}}, ["x"])],
        {"f": {"x": 2.5}},
        [("float_given_int", "[f(x=2)]"), ("float_given_str", "[f(x='2.5')]")],
    ),
    (
        [_doc("f", {"x": {"type": "any"}, "e": {"type": "enum"}}, ["x"])],
        {"f": {"x": "abc", "e": "red"}},
        [
            ("any_and_enum", "[f(x='abc', e='blue')]"),
            ("enum_as_int", "[f(x='abc', e=3)]"),
            ("any_as_int", "[f(x=5)]"),
        ],
    ),
    (
        [_doc("f", {"l": {"type": "list(string)"}, "m": {"type": "list(enum)"}}, ["l"])],
        {"f": {"l": ["a b", "c"], "m": ["x"]}},
        [
            ("list_string", "[f(l=['ab', 'c'], m=['x'])]"),
            ("list_string_int_items", "[f(l=[1, 2], m=['x'])]"),
            ("list_enum_wrong", "[f(l=['ab', 'c'], m=['y'])]"),
        ],
    ),
    (
        [_doc("f", {"d": {"type": "dict"}}, ["d"])],
        {"f": {"d": {"k": True, "n": {"z": 1}}}},
        [
            ("dict_true_string", "[f(d={'k': 'true', 'n': {'z': 1}})]"),
            ("dict_nested_wrong", "[f(d={'k': True, 'n': {'z': 2}})]"),
            ("dict_nested_not_dict", "[f(d={'k': True, 'n': 5})]"),
        ],
    ),
    (
        [_doc("f", {"n": I}, ["n"])],
        {"f": {"n": 1}},
        [
            ("int_given_true", "[f(n=True)]"),
            ("int_given_false", "[f(n=False)]"),
            ("int_given_float", "[f(n=1.0)]"),
            ("int_given_str", "[f(n='1')]"),
        ],
    ),
    ([_doc("f", {"s": S}, None)], {"f": {"s": "a"}}, [("no_required_key", "[f(s='a')]")]),
    (
        [{"name": "f", "description": "synthetic", "parameters": {}}],
        {"f": {}},
        [("no_params_no_args", "[f()]"), ("no_params_given_args", "[f(a=1)]")],
    ),
    (
        [_doc("f", {"s": S}, ["s"])],
        {"f": {}},
        [("empty_answer_no_args", "[f()]"), ("empty_answer_given_args", "[f(s='a')]")],
    ),
    (
        [_doc("f", {"l": {"type": "array", "items": {"type": None}}}, ["l"])],
        {"f": {"l": ["a"]}},
        [("items_type_null", "[f(l=['a'])]")],
    ),
    (
        [_doc("f", {"l": {"type": "array", "items": "string"}}, ["l"])],
        {"f": {"l": ["a"]}},
        [("items_not_object", "[f(l=['a'])]")],
    ),
    ([_doc("f", {"r": {"type": "resistor"}}, ["r"])], {"f": {"r": "x"}}, [("unknown_type", "[f(r='x')]")]),
    (
        [{"description": "no name"}, _doc("f", {"s": S}, ["s"])],
        {"f": {"s": "a"}},
        [("doc_without_name_first", "[f(s='a')]")],
    ),
    (
        [_doc("f", {"s": S}, ["s"]), {"description": "no name"}],
        {"f": {"s": "a"}},
        [("doc_without_name_after", "[f(s='a')]")],
    ),
    (
        [_doc(5, {"s": S}, ["s"]), _doc("f", {"s": S}, ["s"])],
        {"f": {"s": "a"}},
        [("doc_name_not_string", "[f(s='a')]")],
    ),
    (
        [_doc("get", {"q": S}, ["q"]), _doc("get_weather", {"city": S}, ["city"])],
        {"get_weather": {"city": "Paris"}},
        [("description_shadowed", "[get_weather(city='Paris')]")],
    ),
    (
        [_doc("api_2", {"s": S}, ["s"])],
        {"api_2": {"s": "a"}},
        [("numeric_suffix_name", "[api_2(s='a')]"), ("numeric_suffix_stripped", "[api(s='a')]")],
    ),
    (
        [_doc("f", {"m": {"type": "array", "items": {"type": "array"}}}, ["m"])],
        {"f": {"m": [[1, 2], [3]]}},
        [("array_of_arrays", "[f(m=[[1, 2], [3]])]"), ("array_of_arrays_flat", "[f(m=[1, 2, 3])]")],
    ),
    (
        [_doc("f", {"o": {"type": "array", "items": {"type": "object"}}}, ["o"])],
        {"f": {"o": [{"a": "x y", "b": 2}]}},
        [("array_of_objects", "[f(o=[{'a': 'x y', 'b': 2}])]"), ("array_of_objects_count", "[f(o=[])]")],
    ),
    (
        [_doc("f", {"x": {"type": "number"}}, ["x"])],
        {"f": {"x": 3}},
        [("number_given_float", "[f(x=3.5)]"), ("number_given_str", "[f(x='3')]")],
    ),
    (
        [_doc("f", {"s": S, "o": S}, ["s"])],
        {"f": {"s": "abc", "o": ""}},
        [
            ("optional_empty_answer", "[f(s='abc', o='anything')]"),
            ("optional_empty_answer_int", "[f(s='abc', o=4)]"),
        ],
    ),
]

# Value expressions substituted into f(s=..., n=...): s is a string whose answer is "abc", n an
# integer (never value-checked upstream, so only decoding and the type decide).
_VALUE_EXPRS = [
    ("binop_strings", "s='a'+'bc'"),
    ("binop_repeat", "s='abc'*2"),
    ("binop_int", "n=2*3+1"),
    ("binop_float_int", "n=7/2"),
    ("binop_zero_division", "n=1/0"),
    ("binop_builtin_len", "n=len('abc')+1"),
    ("binop_builtin_abs", "n=abs(-2)*3"),
    ("binop_str_call", "s='ab'+str('c')"),
    ("binop_subscript", "n=[1,2][0]+1"),
    ("binop_ifexp", "n=(1 if True else 2)+1"),
    ("binop_name", "n=x+1"),
    ("binop_fstring", "s='a'+f'bc'"),
    ("binop_big_power", "n=10**50"),
    ("binop_tuple_concat", "n=(1,)+(2,)"),
    ("binop_set_union", "n={1}|{2}"),
    ("binop_compare", "n=(1<2)+1"),
    ("binop_bool", "n=(True and 3)+1"),
    ("binop_matmul", "n=1@2"),
    ("unary_minus", "n=-5"),
    ("unary_plus", "n=+5"),
    ("unary_not", "n=not True"),
    ("unary_invert", "n=~5"),
    ("unary_name", "n=-x"),
    ("unary_string", "s=-'abc'"),
    ("unary_nested", "n=--5"),
    ("unary_float", "n=-2.5"),
    ("name_value", "s=abc"),
    ("attribute_value", "s=a.b"),
    ("subscript_value", "s=abc[0]"),
    ("set_value", "s={'abc'}"),
    ("fstring_value", "s=f'abc'"),
    ("lambda_value", "s=lambda: 1"),
    ("compare_value", "n=1<2"),
    ("boolop_value", "n=True and False"),
    ("ellipsis_value", "s=..."),
    ("none_value", "s=None"),
    ("bytes_value", "s=b'abc'"),
    ("complex_value", "n=1j"),
    ("nested_call_no_kw", "s=g()"),
    ("nested_call_kw", "s=g(x=1)"),
    ("dict_splat", "s={**{'a': 1}}"),
    ("dict_unhashable_key", "s={[1]: 2}"),
    ("tuple_value", "s=('abc',)"),
    ("list_value", "s=['abc']"),
    ("kwargs_splat", "**{'s': 'abc'}"),
    ("positional_only", "'abc'"),
    ("keyword_twice", "s='abc', s='abc'"),
    ("walrus", "s=(y:='abc')"),
    ("null_byte", "s='abc'\x00"),
    ("starred_list", "s=[*'abc']"),
    ("comprehension", "s=[c for c in 'abc']"),
    ("generator_value", "s=(c for c in 'a')"),
    ("method_lower", "s='ABC'.lower()+''"),
    ("method_join", "s='-'.join(['a','b','c'])+''"),
    ("builtin_int", "n=int('3')+1"),
    ("builtin_max_min", "n=max([1,2])+min(3,4)"),
    ("builtin_round", "n=round(2.567,1)*1"),
    ("percent_format", "s='%s'%'abc'+''"),
    ("slice_reverse", "s='cba'[::-1]+''"),
    ("dict_subscript", "n={'a':1}['a']+1"),
    ("dict_get", "n={'a':1}.get('b',0)+1"),
    ("bool_arith", "n=True+True"),
    ("str_none", "s=str(None)+'abc'"),
    ("fstring_spec", "s=f'{1:03d}'+'abc'"),
    ("short_circuit", "n=(True or 1/0)+1"),
    ("chained_compare", "n=(1<2<3)+0"),
    ("builtin_bad_arg", "n=int('x')+1"),
    ("index_error", "n=[1][5]+1"),
    ("key_error", "n={'a':1}['b']+1"),
    ("method_on_int", "n=(5).bit_length()+1"),
    ("starred_call", "n=max(*[1,2])+1"),
    # known gaps: upstream evaluates these with eval(); we refuse them (never eval model text, size limits)
    ("gap:lambda_call", "n=(lambda:1)()+1"),
    ("gap:module_global", "s=json.dumps('abc')+''"),
    ("gap:walrus_in_binop", "n=(y:=2)+1"),
    ("gap:big_repeat", "s='abc'*40000"),
    ("gap:big_power", "n=2**200000"),
]


def synthetic_items() -> list[tuple[dict[str, Any], dict[str, Any], list[tuple[str, Any]]]]:
    """(question line, answer line, labelled outputs) for every synthetic entry."""
    items = []
    for n, (functions, gt, outputs) in enumerate(_SPECS):
        eid = f"{CATEGORY}_synthetic_{n}"
        items.append(
            (
                {"id": eid, "question": "synthetic", "function": functions, "time": ""},
                {"id": eid, "ground_truth": gt},
                outputs,
            )
        )
    functions = [_doc("f", {"s": S, "n": I}, [])]
    outputs = []
    for label, expr in _VALUE_EXPRS:
        outputs.append((label, f"[f({expr})]"))
        outputs.append(
            (label + "_with_s", f"[f(s='abc', {expr})]" if not expr.startswith("s=") else f"[f({expr}, n=1)]")
        )
    eid = f"{CATEGORY}_synthetic_values"
    items.append(
        (
            {"id": eid, "question": "synthetic", "function": functions, "time": ""},
            {"id": eid, "ground_truth": {"f": {"s": "abc", "n": 1}}},
            outputs,
        )
    )
    return items
