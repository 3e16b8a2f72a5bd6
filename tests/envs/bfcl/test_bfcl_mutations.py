"""Hand-written mutations of real BFCL-v3 entries with the verdicts the official rules give.

Every row of CASES was also run through the official checker (bfcl-eval 2025.8.6.2, in a throwaway
venv) with the same verdicts; benchmarks/bfcl_official_agreement.py does this at scale.
"""
import pytest

from envs.bfcl.ast_checker import Verdict, check_ast, standardize
from envs.bfcl.data import entries_by_id
from envs.data import has_data
from envs.bfcl.scoring import score_entry

pytestmark = pytest.mark.skipif(not has_data("bfcl_v3"), reason="BFCL-v3 data not found; set LOPD_DATA_DIR")

# (entry id, format, model output, valid?, official error_type)
CASES = [
    # simple_0: calculate_triangle_area(base=10, height=5, unit="units" or omitted)
    ("simple_0", "prompt", "[calculate_triangle_area(base=10, height=5)]", True, ""),
    ("simple_0", "prompt", "[calculate_triangle_area(base=10, height=5, unit='units')]", True, ""),
    ("simple_0", "prompt", "[calculate_triangle_area(base=10, height=5, unit='Units ')]", True, ""),
    ("simple_0", "prompt", "[calculate_triangle_area(base=10, height=5, unit='cm')]", False, "value_error:string"),
    ("simple_0", "prompt", "[calculate_triangle_area(base=11, height=5)]", False, "value_error:others"),
    ("simple_0", "prompt", "[calculate_triangle_area(base=10)]", False, "simple_function_checker:missing_required"),
    ("simple_0", "prompt", "[calculate_triangle_area(base=10, height=5, color='red')]", False,
     "simple_function_checker:unexpected_param"),
    ("simple_0", "prompt", "[calculate_triangle_area(base='10', height=5)]", False, "type_error:simple"),
    ("simple_0", "prompt", "[calculate_triangle_area(base=10.0, height=5)]", False, "type_error:simple"),
    ("simple_0", "prompt", "[triangle_area(base=10, height=5)]", False, "simple_function_checker:wrong_func_name"),
    ("simple_0", "prompt", "[calculate_triangle_area(base=10, height=5), calculate_triangle_area(base=10, height=5)]",
     False, "simple_function_checker:wrong_count"),
    ("simple_0", "prompt", "calculate_triangle_area(base=10, height=5)", True, ""),
    ("simple_0", "prompt", "```[calculate_triangle_area(base=10, height=5)]```", True, ""),
    ("simple_0", "prompt", "```python\n[calculate_triangle_area(base=10, height=5)]\n```", False,
     "ast_decoder:decoder_failed"),
    ("simple_0", "prompt", "I think the area is 25.", False, "ast_decoder:decoder_failed"),
    ("simple_0", "fc", [{"calculate_triangle_area": '{"base": 10, "height": 5}'}], True, ""),
    ("simple_0", "fc", [{"calculate_triangle_area": '{"base": 10, "height": 5, "unit": "UNITS"}'}], True, ""),
    ("simple_0", "fc", [{"calculate_triangle_area": {"base": 10, "height": 5}}], False, "ast_decoder:decoder_failed"),
    ("simple_0", "fc", [], False, "simple_function_checker:wrong_count"),
    ("simple_0", "fc", "The area is 25.", False, "ast_decoder:decoder_failed"),
    # simple_1: math.factorial(number=5): FC names write the dot as an underscore
    ("simple_1", "prompt", "[math.factorial(number=5)]", True, ""),
    ("simple_1", "prompt", "[math_factorial(number=5)]", False, "simple_function_checker:wrong_func_name"),
    ("simple_1", "fc", [{"math_factorial": '{"number": 5}'}], True, ""),
    ("simple_1", "fc", [{"math.factorial": '{"number": 5}'}], False, "simple_function_checker:wrong_func_name"),
    # parallel_0: two spotify.play calls, any order, equal count
    ("parallel_0", "prompt", "[spotify.play(artist='Taylor Swift', duration=20), spotify.play(artist='Maroon 5', duration=15)]",
     True, ""),
    ("parallel_0", "prompt", "[spotify.play(artist='Maroon 5', duration=15), spotify.play(artist='Taylor Swift', duration=20)]",
     True, ""),
    ("parallel_0", "prompt", "[spotify.play(artist='taylor swift', duration=20), spotify.play(artist='maroon-5', duration=15)]",
     True, ""),
    ("parallel_0", "prompt", "[spotify.play(artist='Taylor Swift', duration=20)]", False,
     "parallel_function_checker_no_order:wrong_count"),
    ("parallel_0", "prompt", "[spotify.play(artist='Taylor Swift', duration=20), spotify.play(artist='Maroon 5', duration=16)]",
     False, "parallel_function_checker_no_order:cannot_find_match"),
    ("parallel_0", "fc", [{"spotify_play": '{"artist": "Maroon 5", "duration": 15}'},
                          {"spotify_play": '{"artist": "Taylor Swift", "duration": 20}'}], True, ""),
    # multiple_0: exactly one call; optional booleans may be omitted
    ("multiple_0", "prompt", "[triangle_properties.get(side1=5, side2=4, side3=3)]", True, ""),
    ("multiple_0", "prompt", "[triangle_properties.get(side1=5, side2=4, side3=3, get_area=True)]", True, ""),
    ("multiple_0", "prompt", "[triangle_properties.get(side1=5, side2=4, side3=3, get_area=False)]", False,
     "value_error:others"),
    ("multiple_0", "prompt", "[triangle_properties.get(side1=5, side2=4, side3=3, get_area=1)]", False,
     "type_error:simple"),
    ("multiple_0", "prompt", "[triangle_properties.get(side1=5, side2=4, side3=3), math.sqrt(x=4)]", False,
     "multiple_function_checker:wrong_count"),
    # parallel_multiple_0: list values compare in order
    ("parallel_multiple_0", "prompt",
     "[math_toolkit.product_of_primes(count=5), math_toolkit.sum_of_multiples(lower_limit=1, upper_limit=1000, multiples=[3, 5])]",
     True, ""),
    ("parallel_multiple_0", "prompt",
     "[math_toolkit.sum_of_multiples(lower_limit=1, upper_limit=1000, multiples=[5, 3]), math_toolkit.product_of_primes(count=5)]",
     False, "parallel_function_checker_no_order:cannot_find_match"),
    ("parallel_multiple_0", "prompt",
     "[math_toolkit.sum_of_multiples(lower_limit=1, upper_limit=1000, multiples=(3, 5)), math_toolkit.product_of_primes(count=5)]",
     False, "parallel_function_checker_no_order:cannot_find_match"),
    # javascript_0: every value is a string of JavaScript source
    ("javascript_0", "prompt", "[validateUserInput(inputField='userInputField', isComplete=true)]", True, ""),
    ("javascript_0", "fc", [{"validateUserInput": '{"inputField": "userInputField", "isComplete": "true"}'}], True, ""),
    ("javascript_0", "fc", [{"validateUserInput": '{"inputField": "userInputField", "isComplete": true}'}], False,
     "type_error:js"),
    ("javascript_0", "fc", [{"validateUserInput": '{"inputField": "userInputField", "isComplete": "yes"}'}], False,
     "type_error:simple"),
    # java_2: Java strings; a non-string value is a Java type error
    ("java_2", "fc", [{"FireBirdUtils_getViewSourceWithHeader":
                       '{"monitor": "dbMonitor", "view": "EmployeeView", "source": "SELECT * FROM Employee WHERE status = \'active\'"}'}],
     True, ""),
    ("java_2", "fc", [{"FireBirdUtils_getViewSourceWithHeader": '{"monitor": 1, "view": "EmployeeView", "source": "x"}'}],
     False, "type_error:java"),
    # relevance rules
    ("irrelevance_0", "prompt", "I cannot answer that with these functions.", True, ""),
    ("irrelevance_0", "prompt", "[]", True, ""),
    ("irrelevance_0", "fc", [], True, ""),
    ("irrelevance_0", "fc", [{"calculate_area_under_curve": '{"a": 1}'}], False, "irrelevance_error:decoder_success"),
    ("live_relevance_0-0-0", "fc", [], False, "relevance_error:decoder_failed"),
]


def _ids():
    return [f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)]


@pytest.mark.parametrize("entry_id, fmt, output, valid, error_type", CASES, ids=_ids())
def test_mutation_verdicts(entry_id, fmt, output, valid, error_type):
    entry = entries_by_id(entry_id.rsplit("_", 1)[0])[entry_id]
    v = score_entry(entry, output, fmt)
    assert (v.valid, v.error_type) == (valid, error_type), v.error


def test_live_relevance_needs_a_call():
    entry = entries_by_id("live_relevance")["live_relevance_0-0-0"]
    name = entry.functions[0]["name"]
    assert score_entry(entry, f"[{name}()]", "prompt").valid
    assert not score_entry(entry, "[]", "prompt").valid


# ---- synthetic docs for the structural rules --------------------------------------------------

def _doc(props, required=()):
    return [{"name": "f", "parameters": {"type": "dict", "properties": props, "required": list(required)}}]


def _check(props, value, allowed, category="simple", language="Python"):
    return check_ast(_doc(props), [{"f": {"p": value}}], [{"f": {"p": allowed}}], language, category)


def test_standardisation():
    assert standardize("New York, NY.") == "newyorkny" and standardize("it's") == 'it"s'
    assert _check({"p": {"type": "string"}}, "NEW-YORK", ["new york"]).valid
    assert not _check({"p": {"type": "string"}}, "new yorks", ["new york"]).valid


def test_lists_dicts_and_lists_of_dicts():
    arr = {"p": {"type": "array", "items": {"type": "string"}}}
    assert _check(arr, ["A b", "c"], [["ab", "C"]]).valid
    assert not _check(arr, ["c", "ab"], [["ab", "c"]]).valid                 # order matters
    assert _check(arr, [], [[], ""]).valid
    dct = {"p": {"type": "dict"}}
    assert _check(dct, {"k": "V"}, [{"k": ["v"], "o": [""]}]).valid           # optional key omitted
    assert _check(dct, {"k": "v", "x": 1}, [{"k": ["v"]}]).error_type == "value_error:dict_key"
    assert _check(dct, {"k": "v"}, [{"k": ["v"], "m": ["w"]}]).error_type == "value_error:dict_key"
    lod = {"p": {"type": "array", "items": {"type": "dict"}}}
    assert _check(lod, [{"a": 1}, {"a": 2}], [[{"a": [1]}, {"a": [2]}]]).valid
    assert _check(lod, [{"a": 2}, {"a": 1}], [[{"a": [1]}, {"a": [2]}]]).error_type == "value_error:dict_value"
    assert _check(lod, [{"a": 1}], [[{"a": [1]}, {"a": [2]}]]).error_type == "value_error:list_dict_count"


def test_types_variables_and_numbers():
    flt = {"p": {"type": "float"}}
    assert _check(flt, 2, [2.0]).valid                        # Python ints pass for floats
    assert _check(flt, 2.0, [2]).valid                        # 2.0 == 2
    var = {"p": {"type": "integer"}}
    assert _check(var, "n", ["n"]).valid                      # an answer of another type is a variable
    assert not _check(var, True, [1]).valid                   # bool is not int
    nested = {"p": {"type": "array", "items": {"type": "integer"}}}
    assert _check(nested, [1, 2], [[1, 2]]).valid
    assert _check(nested, [1, "2"], [[1, 2]]).error_type == "type_error:nested"
    tup = {"p": {"type": "tuple", "items": {"type": "integer"}}}
    assert _check(tup, (1, 2), [[1, 2]]).valid                # tuples become lists for tuple params


def test_java_conversion_in_checker():
    doc = {"p": {"type": "long"}}
    assert _check(doc, "5L", [5], category="java", language="Java").valid
    assert not _check(doc, "5", [5], category="java", language="Java").valid
    arr = {"p": {"type": "Array", "items": {"type": "integer"}}}
    assert _check(arr, "new int[]{1, 2}", [[1, 2]], category="java", language="Java").valid
    assert not _check(arr, [1, 2], [[1, 2]], category="java", language="Java").valid


def test_verdict_serialises():
    assert Verdict(False, "x", ["e"]).as_dict() == {"valid": False, "error_type": "x", "error": ["e"]}
