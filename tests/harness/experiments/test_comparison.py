"""The comparison protocol: equal tuning, stage settings, choice by validation, budgets."""

from pathlib import Path

import pytest

from harness.experiments.comparison import LEARNERS, Protocol, choose, headline_specs, load_protocol, stage_config, tune_specs
from harness.experiments.comparison_report import budgets, paired_tests

ROOT = Path(__file__).resolve().parents[3]
# ablation.yaml is benchmarks/ablation.py's (tests/benchmarks/test_ablation.py), not a comparison of learners
PROTOCOLS = sorted(p for p in (ROOT / "benchmarks" / "protocols").glob("*.yaml") if p.stem != "ablation")


@pytest.mark.parametrize("path", PROTOCOLS, ids=lambda p: p.stem)
def test_packaged_protocols_load_and_tune_every_learner_equally(path):
    proto = load_protocol(path)
    sizes = {n: len(proto.plan(n).sweep) for n in LEARNERS}
    assert len(set(sizes.values())) == 1 and sizes["grpo"] >= 2
    assert len(proto.seeds) >= 5 and not set(proto.seeds) & set(proto.tune_seeds)
    assert proto.demo.eval_tasks >= 120 and proto.demo.generations // proto.demo.eval_every + 1 >= 10
    assert proto.demo.min_bank == 0  # no scripted-expert episode enters the bank


def test_headline_protocol_keeps_scripted_expert_text_out():
    proto = load_protocol(ROOT / "benchmarks" / "protocols" / "equal_data.yaml")
    assert "opsd.oracle=bank" in proto.opsd.fixed
    assert proto.demo.coldstart_source == "referenced"


def test_protocol_rejects_unequal_sweeps_and_reused_seeds():
    with pytest.raises(ValueError, match="same number"):
        load_protocol(ROOT / "benchmarks" / "protocols" / "equal_data.yaml", ["grpo.sweep=[[optim.lr=1e-3]]"])
    with pytest.raises(ValueError, match="must not overlap"):
        Protocol(seeds=[0, 1], tune_seeds=[0], demo=_demo(val_tasks=4))
    with pytest.raises(ValueError, match="val_tasks"):
        Protocol(demo=_demo(val_tasks=0))
    with pytest.raises(ValueError, match="ablation"):
        Protocol(demo=_demo(val_tasks=4), ablations={"grpo": []})


def _demo(**kw):
    from harness.experiments.demo import DemoConfig

    return DemoConfig(**kw)


def test_stages_read_validation_for_tuning_and_test_for_the_report(tmp_path):
    proto = Protocol(demo=_demo(val_tasks=60, eval_tasks=120, eval_every=64), seeds=[1, 2], tune_seeds=[0],
                     tune_eval_every=128)
    t, s = stage_config(proto, tmp_path, "tune"), stage_config(proto, tmp_path, "test")
    assert (t.eval_split, t.eval_tasks, t.seeds, t.eval_every, Path(t.out).name) == ("val", 60, [0], 128, "tune")
    assert (s.eval_split, s.eval_tasks, s.seeds, s.eval_every, Path(s.out).name) == ("eval", 120, [1, 2], 64, "test")


def _curve(*means):
    return [{"generations": 64 * i, "mean": m} for i, m in enumerate(means)]


def test_choose_reads_the_validation_area_and_breaks_ties_by_order():
    proto = load_protocol(ROOT / "benchmarks" / "protocols" / "equal_data.yaml")
    specs = {}
    for n in LEARNERS:
        for i in range(4):
            # config 2 has the best area; config 3 the best final but a slow start
            means = {0: (0.3, 0.4, 0.4), 1: (0.3, 0.4, 0.4), 2: (0.3, 0.6, 0.5), 3: (0.3, 0.3, 0.7)}[i]
            specs[f"{n}-c{i}"] = {"curve": _curve(*means), "final": means[-1], "seeds": [0]}
    chosen, table = choose(proto, {"specs": specs})
    assert chosen == {n: 2 for n in LEARNERS}
    assert table["grpo"][0]["val_auc"] == pytest.approx(0.4)
    specs["grpo-c2"]["curve"] = _curve(0.3, 0.3, 0.7)  # now configs 2 and 3 tie: the first listed wins
    assert choose(proto, {"specs": specs})[0]["grpo"] == 2


def test_headline_specs_put_the_threshold_learner_first_and_build_ablations_on_lopds_choice():
    proto = load_protocol(ROOT / "benchmarks" / "protocols" / "equal_data.yaml")
    specs = headline_specs(proto, {"grpo": 1, "opsd": 0, "sdpo": 3, "lopd": 2})
    assert [s.label for s in specs] == ["grpo", "opsd", "sdpo", "lopd", "lopd-frozen"]
    lopd, frozen = specs[3], specs[4]
    assert frozen.overrides == [*lopd.overrides, "lopd.train_composer=false"]
    assert lopd.overrides == [*proto.lopd.fixed, *proto.lopd.sweep[2]]
    assert len(tune_specs(proto)) == 16 and tune_specs(proto)[0].label == "grpo-c0"


def test_budgets_count_the_bank_and_cold_start_only_for_learners_that_read_them():
    report = {"config": {"generations": 640},
              "bank": {"base_episodes": 600, "expert": 0},
              "coldstart": {"traces": {"source": "referenced", "episodes": 600}, "composers": {"lopd": {}}}}
    b = {n: budgets({"learner": n, "overrides": ov}, n, report)
         for n, ov in [("grpo", []), ("sdpo", []), ("opsd", ["opsd.oracle=bank"]), ("lopd", [])]}
    assert b["grpo"] == {"rl": 640, "bank": 0, "coldstart": 0, "expert": 0, "total": 640}
    assert b["sdpo"]["total"] == 640
    assert b["opsd"]["total"] == 1240 and b["opsd"]["coldstart"] == 0
    assert b["lopd"]["total"] == 1840
    ref = budgets({"learner": "opsd", "overrides": ["opsd.oracle=reference"]}, "opsd", report)
    assert ref["total"] == 640  # the reference oracle reads no bank


def test_paired_tests_pair_the_seeds_both_runs_have():
    import numpy as np

    rng = np.random.default_rng(0)
    lopd = rng.random((5, 20, 3))
    ablation = lopd[[0, 2]] - 0.1  # seeds 1 and 3 of LOPD's five, every reward 0.1 lower
    out = paired_tests({"lopd": lopd, "grpo": lopd.copy(), "frozen": ablation, "other": lopd[:1]},
                       {"lopd": [1, 2, 3, 4, 5], "grpo": [1, 2, 3, 4, 5], "frozen": [1, 3], "other": [9]}, n_boot=200)
    assert set(out) == {"grpo", "frozen"}  # no seed in common with "other"
    assert out["frozen"]["seeds"] == [1, 3] and out["grpo"]["seeds"] == [1, 2, 3, 4, 5]
    assert out["frozen"]["final"]["diff"] == pytest.approx(0.1) and out["frozen"]["final"]["lo"] == pytest.approx(0.1)
    assert out["grpo"]["final"]["diff"] == 0.0 and out["grpo"]["auc"]["diff"] == 0.0


def test_the_threshold_is_the_median_of_the_seeds_finals_and_each_seed_reports_its_own():
    """One collapsed seed (final 0.1) moves the mean of the finals (0.45) but not their median (0.6)."""
    import numpy as np

    from harness.experiments.comparison_report import per_seed_to_threshold, robust_threshold

    finals = [0.6, 0.65, 0.1]
    R = np.array([[[0.2, 0.62, f]] * 4 for f in finals])  # [S=3, T=4, P=3]
    assert robust_threshold(R) == 0.6
    assert per_seed_to_threshold(R, [0, 64, 128], 0.6, [1, 2, 3]) == {"1": 64, "2": 64, "3": 64}
    assert per_seed_to_threshold(R, [0, 64, 128], 0.64, [1, 2, 3]) == {"1": None, "2": 128, "3": None}
