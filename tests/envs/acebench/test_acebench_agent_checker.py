"""End-to-end and process accuracy for agent entries, with ACEBench's quirks."""

import pytest

from envs.acebench.agent_checker import ProcessCrash, agent_state_check, process_accuracy

BASE = {"BaseApi": {"wifi": True, "logged_in": True}}
INBOX = {"MessageApi": {"inbox": {"1": {"m": "a"}, "7": {"m": "b"}}}}


def check(saved, answer):
    r = agent_state_check(saved, answer)
    return r["valid"], r["error_type"]


def test_exact_states_pass_and_differences_fail():
    assert check([BASE, INBOX], [BASE, INBOX]) == (True, "")
    assert check([INBOX, BASE], [BASE, INBOX]) == (True, "")  # matched by class name, not position
    assert check([{"BaseApi": {"wifi": False, "logged_in": True}}, INBOX], [BASE, INBOX]) == (
        False,
        "class attributes wrong",
    )
    other = {"MessageApi": {"inbox": {"1": {"m": "a"}, "7": {"m": "c"}}}}
    assert check([BASE, other], [BASE, INBOX]) == (False, "class attributes wrong")


def test_class_count_must_match():
    assert check([BASE], [BASE, INBOX]) == (False, "wrong number of class")
    assert check([], [BASE]) == (False, "wrong number of class")


def test_quirk_dict_attributes_compare_answer_keys_only():
    extra = {"MessageApi": {"inbox": {"1": {"m": "a"}, "7": {"m": "b"}, "8": {"m": "extra"}}}}
    assert check([BASE, extra], [BASE, INBOX]) == (True, "")
    missing = {"MessageApi": {"inbox": {"1": {"m": "a"}}}}
    assert check([BASE, missing], [BASE, INBOX]) == (False, "class attributes wrong")


def test_quirk_missing_attributes_are_not_checked_but_extra_ones_fail():
    assert check([{"BaseApi": {"wifi": True}}], [BASE]) == (True, "")
    assert check([{"BaseApi": {"wifi": True, "logged_in": True, "x": 1}}], [BASE]) == (
        False,
        "class attributes wrong",
    )


def test_quirk_unmatched_class_names_reuse_the_previous_verdict():
    misspelt = {"ReminderAPI": {"reminder_list": {"1": "anything"}}}
    reminder = {"ReminderApi": {"reminder_list": {}}}
    assert check([BASE, reminder], [BASE, misspelt]) == (True, "")  # never compared
    bad_base = {"BaseApi": {"wifi": False, "logged_in": True}}
    assert check([bad_base, reminder], [BASE, misspelt]) == (
        False,
        "class attributes wrong",
    )  # failure repeats


def test_bad_results_do_not_crash():
    assert check("nope", [BASE])[0] is False
    assert check([{"BaseApi": "x"}], [BASE]) == (False, "checker_error")
    assert check(None, [BASE]) == (False, "checker_error")  # len(None) raises upstream


def test_non_list_results_are_judged_like_upstream_loop():
    # Regressions found by the official agreement check (benchmarks/acebench_official_agreement.py):
    # upstream takes len() of any result, then iterates it.
    assert check("nope", [BASE]) == (False, "wrong number of class")
    assert check({"BaseApi": {}}, [BASE, INBOX]) == (False, "wrong number of class")
    assert check("x", [BASE]) == (False, "checker_error")  # same length: iterating a string crashes
    assert check({"BaseApi": {}}, [BASE]) == (False, "checker_error")  # iterating a dict gives its keys
    assert check([BASE, "x"], [BASE, INBOX]) == (False, "checker_error")  # .keys() on a string


def test_quirk_empty_answers_and_empty_states_are_never_compared():
    assert check([BASE], [{}]) == (True, "")  # nothing has an empty key set except {} (falsy)
    assert check([{}], [BASE]) == (True, "")
    assert check([{"BaseApi": {}}], [{"BaseApi": [1]}]) == (True, "")  # no saved attribute to compare


def test_process_accuracy_is_an_ordered_subsequence_share():
    stones = ["[a()]", "[b()]", "[c()]"]
    assert process_accuracy(["[a()]", "[b()]", "[c()]"], stones) == 1.0
    assert process_accuracy([" [a()] ", "[b()]", "[x()]"], stones) == 2 / 3  # strip; unrounded
    # QUIRK: a milestone never found consumes the rest of the search, so "[c()]" is not found here
    assert process_accuracy(["[a()]", "[x()]", "[c()]"], stones) == 1 / 3
    assert process_accuracy(["[c()]", "[b()]", "[a()]"], stones) == 1 / 3
    assert process_accuracy([], stones) == 0.0
    assert process_accuracy(["[a()]"], [[]]) == 1.0  # an empty alternative list counts as found


def test_process_accuracy_raises_where_upstream_raises():
    # Regressions from the official agreement check: upstream's agent_eval_process calls .strip() on
    # every process item its search reaches and reads mile_stone[0] and the result's "process" key.
    stones = ["[a()]", "[b()]"]
    for process in ([None, "[a()]"], ["[a()]", 3], [["[a()]"]], None, 5):
        with pytest.raises(ProcessCrash):
            process_accuracy(process, stones)
    assert process_accuracy(["[a()]", "[b()]", None], stones) == 1.0  # the search never reaches None
    assert process_accuracy("[a()]", ["a"]) == 1.0  # a string is searched character by character
    for mile_stone in ([], None):
        with pytest.raises(ProcessCrash):
            process_accuracy(["[a()]"], mile_stone)
    # alternatives: the best share, rounded to 3 places
    assert process_accuracy(["[a()]", "[c()]"], [stones, ["[a()]", "[c()]", "[d()]"]]) == 0.667
    assert process_accuracy("garbage", stones) == 0.0  # searched character by character, like upstream
