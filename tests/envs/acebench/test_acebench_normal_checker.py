"""Hand-written mutations get the verdict ACEBench's normal checker gives (rules and quirks)."""

import pytest
from conftest import doc, needs_data

from envs.acebench.decode import decode_prompt
from envs.acebench.normal_checker import check_alternatives, find_description, normal_check, standardize

WEATHER = doc(
    "get_weather",
    {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "unit": {"type": "string", "enum": ["C", "F"]},
        "alerts": {"type": "boolean"},
        "lat": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "options": {
            "type": "object",
            "properties": {"lang": {"type": "string"}, "detail": {"type": "integer"}},
        },
        "stops": {"type": "array", "items": {"type": "object"}},
    },
    required=["city"],
)
FLIGHT = doc(
    "book_flight", {"origin": {"type": "string"}, "dest": {"type": "string"}}, required=["origin", "dest"]
)
DOCS = [WEATHER, FLIGHT]
ANSWER = {"get_weather": {"city": "New York", "days": 3, "tags": ["rain", "wind speed"]}}


def verdict(output, answer=ANSWER, docs=DOCS, category="normal_single_turn_single_function"):
    d = decode_prompt(output)
    if not d.ok:
        return False, "wrong_output_format"
    r = check_alternatives(docs, d.calls, answer, category)
    return r["valid"], r["error_type"]


@pytest.mark.parametrize(
    "output, expected",
    [
        # exact and string-format variants pass: standardisation drops " ,./-_*^", lowercases, and the
        # answer only has to be a substring of the output
        ("[get_weather(city='New York', days=3, tags=['rain', 'wind speed'])]", (True, "")),
        ('[get_weather(city="new-york", days=3, tags=["RAIN", "wind_speed"])]', (True, "")),
        ("[get_weather(city='New York City, USA', days=3, tags=['rain', 'wind speed'])]", (True, "")),
        ("[get_weather(tags=['rain','wind speed'], days=3, city='NEW YORK')]", (True, "")),
        # wrong value
        ("[get_weather(city='Boston', days=3, tags=['rain', 'wind speed'])]", (False, "value_error:string")),
        ("[get_weather(city='York', days=3, tags=['rain', 'wind speed'])]", (False, "value_error:string")),
        # QUIRK: integers are type-checked only, never compared
        ("[get_weather(city='New York', days=300, tags=['rain', 'wind speed'])]", (True, "")),
        # lists: standardised, element-wise, order matters
        (
            "[get_weather(city='New York', days=3, tags=['wind speed', 'rain'])]",
            (False, "value_error:list/tuple"),
        ),
        ("[get_weather(city='New York', days=3, tags=['rain'])]", (False, "value_error:list/tuple")),
        # missing params: a required one fails; an optional answer param may be omitted (QUIRK)
        ("[get_weather(days=3, tags=['rain', 'wind speed'])]", (False, "lack_args")),
        ("[get_weather(city='New York')]", (True, "")),
        # extra params: not in the answer, or not in the schema
        (
            "[get_weather(city='New York', days=3, tags=['rain', 'wind speed'], unit='C')]",
            (False, "addition_args"),
        ),
        (
            "[get_weather(city='New York', days=3, tags=['rain', 'wind speed'], foo=1)]",
            (False, "addition_args"),
        ),
        # wrong types
        ("[get_weather(city='New York', days='3', tags=['rain', 'wind speed'])]", (False, "type_error")),
        ("[get_weather(city='New York', days=3.5, tags=['rain', 'wind speed'])]", (False, "type_error")),
        # QUIRK: a float equal to the answer passes the type check by equality (3.0 == 3)
        ("[get_weather(city='New York', days=3.0, tags=['rain', 'wind speed'])]", (True, "")),
        ("[get_weather(city='New York', days=True, tags=['rain', 'wind speed'])]", (False, "type_error")),
        ("[get_weather(city=5, days=3, tags=['rain', 'wind speed'])]", (False, "type_error")),
        ("[get_weather(city='New York', days=3, tags='rain')]", (False, "type_error")),
        ("[get_weather(city='New York', days=3, tags=['rain', 5])]", (False, "value_error:list/tuple")),
        # wrong function / wrong number of calls
        ("[book_flight(origin='New York', dest='Boston')]", (False, "function_mismatch")),
        ("[get_weather(city='New York'), get_weather(city='New York')]", (False, "wrong functions number")),
        ("[]", (False, "wrong functions number")),
        # decoding failures
        ("get_weather(city='New York')", (False, "wrong_output_format")),
        ("[get_weather(city='New York'", (False, "wrong_output_format")),
    ],
)
def test_single_call_mutations(output, expected):
    assert verdict(output) == expected


def test_bool_strings_are_coerced_before_the_type_check():
    answer = {"get_weather": {"city": "Paris", "alerts": True}}
    assert verdict("[get_weather(city='Paris', alerts='true')]", answer) == (True, "")
    # QUIRK: bool values are never compared either
    assert verdict("[get_weather(city='Paris', alerts=False)]", answer) == (True, "")
    assert verdict("[get_weather(city='Paris', alerts='yes')]", answer) == (False, "type_error")
    # QUIRK: a *string* param whose value is "true" becomes True and fails its type check
    assert verdict("[get_weather(city='true')]", {"get_weather": {"city": "true"}}) == (False, "type_error")


def test_number_maps_to_int_and_floats_pass_as_variables():
    float_answer = {"get_weather": {"city": "Paris", "lat": 48.85}}
    assert verdict("[get_weather(city='Paris', lat=48.85)]", float_answer) == (True, "")
    assert verdict("[get_weather(city='Paris', lat=1.5)]", float_answer) == (True, "")  # value never compared
    assert verdict("[get_weather(city='Paris', lat=48)]", float_answer) == (
        True,
        "",
    )  # int is the schema type
    int_answer = {"get_weather": {"city": "Paris", "lat": 48}}
    assert verdict("[get_weather(city='Paris', lat=48.5)]", int_answer) == (False, "type_error")
    assert verdict("[get_weather(city='Paris', lat=48.0)]", int_answer) == (True, "")  # 48.0 == 48


@pytest.mark.parametrize(
    "options, expected",
    [
        ("{'lang': 'french', 'detail': 2}", (True, "")),
        ("{'lang': 'French', 'detail': 25}", (True, "")),  # '2' is a substring of '25'
        ("{'lang': 'French', 'detail': 3}", (False, "value_error")),
        ("{'lang': 'French'}", (False, "value_error")),
        ("{'lang': 'French', 'x': 2}", (False, "value_error")),
        ("'French'", (False, "type_error")),
    ],
)
def test_objects_need_equal_keys_and_compare_by_str_substring(options, expected):
    answer = {"get_weather": {"city": "Paris", "options": {"lang": "French", "detail": 2}}}
    assert verdict(f"[get_weather(city='Paris', options={options})]", answer) == expected


def test_lists_of_objects_go_item_by_item():
    answer = {"get_weather": {"city": "Paris", "stops": [{"name": "Lyon"}, {"name": "Nice"}]}}
    assert verdict("[get_weather(city='Paris', stops=[{'name': 'lyon'}, {'name': 'Nice'}])]", answer) == (
        True,
        "",
    )
    assert (
        verdict("[get_weather(city='Paris', stops=[{'name': 'Nice'}, {'name': 'Lyon'}])]", answer)[0] is False
    )
    assert verdict("[get_weather(city='Paris', stops=[{'name': 'Lyon'}])]", answer) == (
        False,
        "value_error:list_dict_count",
    )


def test_quirk_spaces_inside_nested_lists_can_never_match():
    # the output loses its whitespace before decoding, but str(answer) inside an object keeps it
    answer = {"get_weather": {"city": "Paris", "options": {"lang": ["Old French"], "detail": 1}}}
    out = "[get_weather(city='Paris', options={'lang': ['Old French'], 'detail': 1})]"
    assert verdict(out, answer) == (False, "value_error")


def test_quirk_empty_list_answers_always_fail():
    answer = {"get_weather": {"city": "Paris", "tags": []}}
    assert verdict("[get_weather(city='Paris', tags=[])]", answer) == (False, "type_error")


PARALLEL_ANSWER = {
    "book_flight_1": {"origin": "Paris", "dest": "Rome"},
    "book_flight_2": {"origin": "Rome", "dest": "Oslo"},
    "get_weather": {"city": "Oslo"},
}


@pytest.mark.parametrize(
    "output, expected",
    [
        (
            (
                "[book_flight(origin='Paris', dest='Rome'), book_flight(origin='Rome', dest='Oslo'), "
                "get_weather(city='Oslo')]"
            ),
            (True, ""),
        ),
        # reordered parallel calls pass: matching is order-free
        (
            (
                "[get_weather(city='Oslo'), book_flight(origin='Rome', dest='Oslo'), "
                "book_flight(origin='Paris', dest='Rome')]"
            ),
            (True, ""),
        ),
        # a dropped parallel call fails the count
        (
            "[book_flight(origin='Paris', dest='Rome'), get_weather(city='Oslo')]",
            (False, "wrong functions number"),
        ),
        # the right count with the wrong mix of names fails the name multiset
        (
            "[book_flight(origin='Paris', dest='Rome'), get_weather(city='Oslo'), get_weather(city='Rome')]",
            (False, "function_mismatch"),
        ),
        # one wrong value among the parallel calls fails; the error reported is the last comparison's
        # (here the get_weather call, a name mismatch), as upstream reports it
        (
            (
                "[book_flight(origin='Paris', dest='Rome'), book_flight(origin='Rome', dest='Bergen'), "
                "get_weather(city='Oslo')]"
            ),
            (False, "simple_function_checker:unclear"),
        ),
        (
            (
                "[book_flight(origin='Paris', dest='Rome'), get_weather(city='Oslo'), "
                "book_flight(origin='Rome', dest='Bergen')]"
            ),
            (False, "value_error:string"),
        ),
        # QUIRK: calls are not matched one to one; "Paris-Rome and Rome-Oslo" both substring-match here
        (
            (
                "[book_flight(origin='Paris and Rome', dest='Rome and Oslo'), book_flight(origin='x', dest='y'), "
                "get_weather(city='Oslo')]"
            ),
            (True, ""),
        ),
    ],
)
def test_parallel_mutations(output, expected):
    assert verdict(output, PARALLEL_ANSWER, category="normal_single_turn_parallel_function") == expected


def test_alternative_answers_any_passes_and_first_error_is_reported():
    alternatives = [{"get_weather": {"city": "Paris"}}, {"get_weather": {"city": "Lyon"}}]
    assert verdict("[get_weather(city='Lyon')]", alternatives) == (True, "")
    assert verdict("[get_weather(city='Nice')]", alternatives) == (False, "value_error:string")


def test_quirk_description_lookup_is_by_substring_in_list_order():
    short = doc("get", {"x": {"type": "integer"}}, required=["x"])
    assert find_description([short, WEATHER], "get_weather") is short
    # so the wrong doc is used and the call is reported as a wrong function name
    r = normal_check(
        [short, WEATHER],
        [{"get_weather": {"city": "Paris"}}],
        {"get_weather": {"city": "Paris"}},
        "normal_similar_api",
    )
    assert (r["valid"], r["error_type"]) == (False, "wrong_function_name")


def test_quirk_function_names_ending_in_digits_never_match():
    api = doc("plan_2", {"x": {"type": "string"}}, required=["x"])
    answer = {"plan_2": {"x": "a"}}
    assert verdict("[plan_2(x='a')]", answer, [api]) == (False, "function_mismatch")
    assert verdict("[plan(x='a')]", answer, [api]) == (False, "wrong_function_name")


def test_no_parameter_calls():
    empty = {"name": "ping", "parameters": {}}
    assert verdict("[ping()]", {"ping": {}}, [empty]) == (True, "")
    # QUIRK: with a {"type": ..., "properties": {}} schema a no-argument call always fails
    typed = doc("ping", {})
    assert verdict("[ping()]", {"ping": {}}, [typed]) == (False, "wrong_param")


def test_where_upstream_would_crash_the_entry_is_invalid():
    untyped = doc("f", {"x": {"description": "no type"}}, required=["x"])
    r = normal_check([untyped], [{"f": {"x": 1}}], {"f": {"x": 1}}, "normal_atom_number")
    assert (r["valid"], r["error_type"]) == (False, "checker_error")
    r = normal_check([], [{"f": {"x": 1}}], {"f": {"x": 1}}, "normal_atom_number")  # no doc for the answer
    assert (r["valid"], r["error_type"]) == (False, "checker_error")


def test_standardize():
    assert standardize("New-York, U.S.A_*^ 'x'") == 'newyorkusa"x"'


@needs_data
def test_mutations_on_real_entries():
    from envs.acebench.data import load_category
    from envs.acebench.ground_truth import normal_output

    entry = load_category("en", "normal_single_turn_single_function")[0]
    gt = entry.ground_truth
    ok = normal_output(gt)
    assert verdict(ok, gt, entry.functions) == (True, "")
    assert verdict(ok.replace("'total'", "'partial'"), gt, entry.functions) == (False, "value_error:string")
    assert verdict(ok.replace("eclipseType='total'", "eclipseType=1"), gt, entry.functions) == (
        False,
        "type_error",
    )
    assert verdict(ok.replace(", eclipseType='total'", ""), gt, entry.functions) == (
        True,
        "",
    )  # optional omitted
    assert verdict(ok.replace("location=", "place="), gt, entry.functions) == (False, "lack_args")
    assert verdict(
        ok.replace(
            "NightSkyAnalysis_performEclipseAnalysis", "AudioPerformanceOptimizer_optimizeMicrophoneSettings"
        ),
        gt,
        entry.functions,
    ) == (False, "function_mismatch")
    parallel = load_category("en", "normal_single_turn_parallel_function")[0]
    calls = normal_output(parallel.ground_truth)[1:-1].split("), ")
    reordered = "[" + calls[1] + ", " + calls[0] + ")]"
    assert verdict(reordered, parallel.ground_truth, parallel.functions) == (True, "")
    assert verdict("[" + calls[0] + ")]", parallel.ground_truth, parallel.functions) == (
        False,
        "wrong functions number",
    )


# ---- regressions found by the same-run agreement check against the official evaluator
# (benchmarks/acebench_official_agreement.py, synthetic entries); each verdict below is the official one.


def test_object_array_params_like_upstream():
    objs = doc("f", {"items": {"type": "objectArray"}}, required=["items"])
    answer = {"f": {"items": [{"a": "x"}, {"a": "y"}]}}
    # a different count is a plain failure; an equal count reaches upstream's broken dict_checker call
    assert verdict("[f(items=[{'a':'x'}])]", answer, [objs]) == (False, "value_error:dict_items")
    assert verdict("[f(items=[])]", answer, [objs]) == (False, "value_error:dict_items")
    assert verdict("[f(items=[{'a':'x'},{'a':'y'}])]", answer, [objs]) == (False, "checker_error")
    assert verdict("[f(items=[])]", {"f": {"items": []}}, [objs]) == (False, "type_error")


def test_docs_without_a_string_name_crash_upstream_only_when_reached():
    f = doc("f", {"s": {"type": "string"}}, required=["s"])
    nameless = {"description": "no name"}
    answer = {"f": {"s": "a"}}
    assert verdict("[f(s='a')]", answer, [nameless, f]) == (False, "checker_error")
    assert verdict("[f(s='a')]", answer, [f, nameless]) == (True, "")
    assert verdict("[f(s='a')]", answer, [doc(5, {}), f]) == (False, "checker_error")
    with pytest.raises(Exception, match="without a name"):
        find_description([nameless, f], "f")


def test_null_item_type_crashes_upstream():
    arr = doc("f", {"l": {"type": "array", "items": {"type": None}}}, required=["l"])
    assert verdict("[f(l=['a'])]", {"f": {"l": ["a"]}}, [arr]) == (False, "checker_error")
    # a non-object "items" is ignored: the item type comes from the type name ("dict" here)
    arr = doc("f", {"l": {"type": "array", "items": "string"}}, required=["l"])
    assert verdict("[f(l=['a'])]", {"f": {"l": ["a"]}}, [arr])[0] is False


def test_call_count_is_compared_before_the_answer_is_read():
    f = doc("f", {"s": {"type": "string"}}, required=["s"])
    r = normal_check([f], [{"f": {"s": "a"}}], "ab", "normal_atom_bool")
    assert (r["valid"], r["error_type"]) == (False, "wrong functions number")
    r = normal_check([f], [{"f": {"s": "a"}}], ["x"], "normal_atom_bool")
    assert (r["valid"], r["error_type"]) == (False, "checker_error")
    r = normal_check([f], [{"f": {"s": "a"}}], 7, "normal_atom_bool")
    assert (r["valid"], r["error_type"]) == (False, "checker_error")
