"""Category accuracies and the official summary weights."""

import pytest

from envs.acebench.scoring import CategoryScore, Verdict, category_score, fc_to_prompt, summary


def v(eid, ok, category="normal_multi_turn_user_adjust", process=None):
    return Verdict(eid, category, ok, "" if ok else "x", None, process)


def test_multi_turn_accuracy_groups_turns_by_dialogue():
    ids = [
        "normal_multi_turn_user_adjust_0_0",
        "normal_multi_turn_user_adjust_0_1",
        "normal_multi_turn_user_adjust_1_0",
        "normal_multi_turn_user_adjust_2_0",
        "normal_multi_turn_user_adjust_2_1",
        "normal_multi_turn_user_adjust_2_2",
    ]
    verdicts = [
        v(ids[0], True),
        v(ids[1], False),
        v(ids[2], True),
        v(ids[3], True),
        v(ids[4], True),
        v(ids[5], False),
    ]
    s = category_score("normal_multi_turn_user_adjust", verdicts, ids)
    assert s.accuracy == 0.333  # one of three dialogues has every turn right
    assert s.process_accuracy == round((0.5 + 1.0 + 0.667) / 3, 3)
    assert (s.correct, s.total) == (4, 6)


def test_rounding_by_family():
    special = [v(f"special_irrelevant_{i}", i < 2, "special_irrelevant") for i in range(3)]
    assert category_score("special_irrelevant", special, []).accuracy == 2 / 3  # unrounded upstream
    normal = [v(f"normal_atom_bool_{i}", i < 2, "normal_atom_bool") for i in range(3)]
    assert category_score("normal_atom_bool", normal, []).accuracy == 0.667
    agent = [
        v("a", True, "agent_multi_step", 1.0),
        v("b", False, "agent_multi_step", 0.5),
        v("c", False, "agent_multi_step", 1 / 3),
    ]
    s = category_score("agent_multi_step", agent, [])
    assert (s.accuracy, s.process_accuracy) == (0.333, 0.611)
    assert category_score("agent_multi_turn", [], []).accuracy == 0.0


def test_summary_weights_and_unweighted_means():
    scores = {c: CategoryScore(c, 1.0, 1, 1) for c in ("special_incomplete", "special_error_param")}
    scores["agent_multi_step"] = CategoryScore("agent_multi_step", 0.5, 1, 2, 0.75)
    scores["normal_atom_bool"] = CategoryScore("normal_atom_bool", 0.6, 3, 5)
    s = summary(scores)
    assert s["special_summary"] == 0.667 and s["agent_summary"] == 0.25 and s["normal_summary"] == 0.05
    assert s["atom"] == 0.1 and s["agent_multi_step_process"] == 0.75
    assert s["summary"] == round(0.2676 * 0.667 + 0.578 * 0.05 + 0.1545 * 0.25, 3)
    full = summary({c: CategoryScore(c, 1.0, 1, 1) for c in _all()})
    assert full["summary"] == 1.0


def _all():
    from envs.acebench.data import ALL_CATEGORIES

    return ALL_CATEGORIES


@pytest.mark.parametrize(
    "calls, text",
    [
        ([{"f": {"a": 1, "b": "x y"}}], "[f(a=1, b='x y')]"),
        ([{"f": {}}, {"g": {"c": [1]}}], "[f(), g(c=[1])]"),
        ([{"f": "not a dict"}], "[f()]"),
    ],
)
def test_fc_to_prompt(calls, text):
    assert fc_to_prompt(calls) == text


def test_agent_process_of_failed_entries_must_be_readable_like_upstream():
    # Regressions from the official agreement check: upstream reads row["process"] of failed entries
    # and strips each item; either failing crashes its evaluation of the whole category.
    from envs.acebench.data import Entry
    from envs.acebench.scoring import verdict

    entry = Entry(
        "agent_multi_step_0",
        "agent_multi_step",
        "en",
        "q",
        [],
        [{"BaseApi": {"wifi": True}}],
        mile_stone=["[a()]"],
    )
    bad = [{"BaseApi": {"wifi": False}}]
    v = verdict(entry, {"id": entry.id, "result": bad})
    assert (v.valid, v.error_type, v.process) == (False, "checker_error", 0.0)
    v = verdict(entry, {"id": entry.id, "result": bad, "process": [None]})
    assert (v.valid, v.error_type, v.process) == (False, "checker_error", 0.0)
    v = verdict(entry, {"id": entry.id, "result": bad, "process": ["[a()] "]})
    assert (v.valid, v.error_type, v.process) == (False, "class attributes wrong", 1.0)
    good = [{"BaseApi": {"wifi": True}}]
    v = verdict(entry, {"id": entry.id, "result": good})  # a success never reads the process
    assert (v.valid, v.process) == (True, 1.0)


def test_the_printed_summary_names_categories_not_run_instead_of_a_zero():
    from envs.acebench.scoring import CategoryScore, format_summary, summary, summary_parts

    scores = {"normal_atom_bool": CategoryScore("normal_atom_bool", 1.0, 50, 50)}
    values = summary(scores)
    assert set(values) == set(summary_parts())  # every number has its categories
    text = format_summary(values, list(scores))
    shown = dict(line.split() for line in text.splitlines() if not line.startswith(("not run", " ")))
    assert shown == {"bool": "1.000", "atom": "0.167", "normal_summary": "0.083", "summary": "0.048"}
    not_run = text.split("not run", 1)[1]
    assert "agent_summary" in not_run and "enum" in not_run and "0.000" not in text
