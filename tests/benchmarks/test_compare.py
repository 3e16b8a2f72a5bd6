"""benchmarks/compare.py without training: the run specs of each group and the ``--lrs`` parsing."""

import pytest

from benchmarks import compare


def by_label(specs):
    return {s.label: s for s in specs}


def test_specs_for_ablation_groups_add_grpo_for_the_threshold_and_carry_the_lrs():
    specs = compare.specs_for(["margin"], {"lopd": 1e-3, "grpo": 3e-4})
    labels = [s.label for s in specs]
    assert labels == ["grpo", "lopd-m0", "lopd", "lopd-m0.2", "lopd-frozen"]
    by = by_label(specs)
    assert by["grpo"].overrides == ["optim.lr=0.0003"]
    assert by["lopd-m0"].overrides == ["optim.lr=0.001", "lopd.margin.margin=0"]
    assert all(s.learner == "lopd" for s in specs[1:])


def test_specs_for_main_lists_every_learner_once():
    specs = compare.specs_for(["main", "retrieval"], {})
    assert [s.label for s in specs] == ["grpo", "opsd", "sdpo", "lopd", "lopd-k1"]
    assert by_label(specs)["lopd"].overrides == []


def test_composer_lr_group_keeps_the_student_lr_and_shares_the_frozen_run_with_margin():
    listed = compare.specs_for(["margin", "composer_lr"], {"lopd": 3e-4})
    assert [s.label for s in listed].count("lopd-frozen") == 1  # in both groups, one run dir, trained once
    specs = by_label(listed)
    assert specs["lopd-clr1e-4-m0"].overrides == ["optim.lr=0.0003", "lopd.composer_optim.lr=1e-4",
                                                  "lopd.margin.margin=0"]
    assert specs["lopd-clr1e-4"].overrides == ["optim.lr=0.0003", "lopd.composer_optim.lr=1e-4"]


def test_parse_lrs_gives_the_same_override_text_as_tuning():
    lrs = compare.parse_lrs(["lopd=1e-3", "grpo=0.0003"])
    assert lrs == {"lopd": 1e-3, "grpo": 3e-4}
    assert by_label(compare.specs_for(["main"], lrs))["lopd"].overrides == ["optim.lr=0.001"]


@pytest.mark.parametrize("item", ["lopd", "ppo=1e-3", "lopd=fast", "lopd=0", "lopd=-1e-3", "lopd=nan"])
def test_parse_lrs_rejects_bad_items(item):
    with pytest.raises(ValueError, match="--lrs"):
        compare.parse_lrs([item])


def test_main_reports_a_bad_lrs_item_as_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        compare.main(["--lrs", "lopd=fast", "--out", "/nonexistent/never-written"])
    assert e.value.code == 2
    assert "is not a number" in capsys.readouterr().err


def test_at_grid_top_names_learners_whose_best_lr_is_the_largest_tried():
    tuning = {"grid": [1e-4, 1e-3, 3e-3], "chosen": {"grpo": 3e-3, "lopd": 1e-3, "sdpo": 3e-3}}
    assert compare.at_grid_top(tuning) == ["grpo", "sdpo"]
    assert compare.at_grid_top({**tuning, "chosen": {"lopd": 1e-4}}) == []


def test_select_keeps_the_named_runs_in_order_and_rejects_unknown_labels():
    specs = compare.specs_for(["main"], {})
    assert [s.label for s in compare.select(specs, ["sdpo", "grpo"])] == ["grpo", "sdpo"]
    assert compare.select(specs, None) == specs
    with pytest.raises(ValueError, match="lopd-m0"):
        compare.select(specs, ["lopd-m0"])
