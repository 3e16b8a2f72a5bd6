"""Special categories: ACEBench's fixed phrases, searched in the raw output."""

import pytest

from envs.acebench.special_checker import special_check

INCOMPLETE = {"RealEstateManager_manageProperty": ["propertyDetails ", " rentalManagement "]}


@pytest.mark.parametrize(
    "output, expected",
    [
        (
            '["Missing necessary parameters (propertyDetails ,  rentalManagement ) for the api '
            '(RealEstateManager_manageProperty)"]',
            (True, ""),
        ),
        # QUIRK: answer params are matched verbatim, stray spaces included
        (
            '["Missing necessary parameters (propertyDetails, rentalManagement) for the api '
            '(RealEstateManager_manageProperty)"]',
            (False, "error_correction"),
        ),
        (
            '["missing necessary parameters (propertyDetails ,  rentalManagement ) for the api '
            '(RealEstateManager_manageProperty)"]',
            (False, "error_detection"),
        ),  # case-sensitive
        (
            '["Missing necessary parameters (propertyDetails ,  rentalManagement ) for the api '
            '(RealEstate)"]',
            (False, "error_correction"),
        ),
        ("[RealEstateManager_manageProperty(propertyDetails='x')]", (False, "error_detection")),
    ],
)
def test_incomplete(output, expected):
    r = special_check("special_incomplete", output, INCOMPLETE)
    assert (r["valid"], r["error_type"]) == expected


def test_error_param():
    answer = {"plan_id": ["1234WrongID"], "date": ["12-Feb-2021"]}
    ok = (
        '["There is incorrect value (1234WrongID, 12-Feb-2021) for the parameters (plan_id) in the history."]'
    )
    assert special_check("special_error_param", ok, answer)["valid"]
    r = special_check("special_error_param", ok.replace("12-Feb-2021", "2021-02-12"), answer)
    assert (r["valid"], r["error_type"]) == (False, "error_correction")
    r = special_check("special_error_param", "Missing necessary parameters", answer)
    assert (r["valid"], r["error_type"]) == (False, "error_detection")


def test_irrelevant():
    ok = "Due to the limitations of the function, I cannot solve this problem."
    assert special_check("special_irrelevant", ok, "...")["valid"]
    assert special_check("special_irrelevant", "I cannot help.", "...")["error_type"] == "error_detection"
    # whitespace is not removed for special categories
    assert not special_check("special_irrelevant", "the limitations  of the function", "...")["valid"]


def test_non_string_results_are_searched_as_containers_or_fail():
    assert special_check("special_irrelevant", ["the limitations of the function"], "...")["valid"]
    assert not special_check("special_irrelevant", ["Due to the limitations of the function."], "...")[
        "valid"
    ]
    for bad in (None, 3, 2.5):
        r = special_check("special_irrelevant", bad, "...")
        assert (r["valid"], r["error_type"]) == (False, "checker_error")
    assert special_check("special_incomplete", "x", "not a dict")["error_type"] == "checker_error"
