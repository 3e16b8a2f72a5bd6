"""Bootstrap intervals and paired tests on arrays whose answers are known (or simulated)."""
import numpy as np
import pytest

from envs.trace import Episode
from harness.stats.bootstrap import (auc, bootstrap_means, curve_ci, generations_to_threshold,
                               generations_to_threshold_ci, paired_difference, stack_runs, task_rewards)


# --- bootstrap_means / curve_ci -------------------------------------------------------------------

def test_constant_rewards_give_a_zero_width_interval():
    for ci in curve_ci(np.full((3, 10, 4), 0.3), n_boot=200):
        assert ci["lo"] == pytest.approx(0.3, abs=1e-12)
        assert ci["hi"] == pytest.approx(0.3, abs=1e-12)
        assert ci["mean"] == pytest.approx(0.3, abs=1e-12)


def test_one_seed_two_tasks_by_hand():
    # Tasks 0 and 1 drawn twice with replacement: mean 0 (1/4), 0.5 (1/2), 1 (1/4).
    boot = bootstrap_means(np.array([[[0.0], [1.0]]]), n_boot=4000, seed=1)
    assert boot.shape == (4000, 1)
    assert set(np.unique(boot)) <= {0.0, 0.5, 1.0}
    share = [np.mean(boot == v) for v in (0.0, 0.5, 1.0)]
    assert share == pytest.approx([0.25, 0.5, 0.25], abs=0.03)  # sd of a share at n=4000 is <= 0.008


def test_seeds_are_resampled():
    boot = bootstrap_means(np.array([[[0.0]], [[1.0]]]), n_boot=1000)
    assert set(np.unique(boot)) == {0.0, 0.5, 1.0}


def test_one_task_resample_is_shared_by_seeds_and_points():
    # R[s, t, p] = t: a shared task draw gives means in {0, 0.5, 1}; per-seed draws would add 0.25, 0.75;
    # and every point of a replicate must have the same mean.
    R = np.broadcast_to(np.array([0.0, 1.0])[None, :, None], (2, 2, 3))
    boot = bootstrap_means(R, n_boot=1000)
    assert set(np.unique(boot)) <= {0.0, 0.5, 1.0}
    assert (boot == boot[:, :1]).all()


def test_deterministic_given_seed():
    R = np.random.default_rng(0).random((3, 20, 2))
    assert np.array_equal(bootstrap_means(R, 300, seed=5), bootstrap_means(R, 300, seed=5))
    assert not np.array_equal(bootstrap_means(R, 300, seed=5), bootstrap_means(R, 300, seed=6))
    for ci in curve_ci(R, n_boot=300):
        assert ci["lo"] <= ci["mean"] <= ci["hi"]


def test_task_only_coverage_is_near_nominal():
    # Model: p_t ~ U(0.2, 0.8), one seed with offset o ~ U(-0.1, 0.1), reward ~ Bernoulli(p_t + o); the
    # truth given the seed is 0.5 + o. With T = 120 iid tasks the percentile bootstrap of a mean is close
    # to nominal (about 0.94: it uses the 1/n variance and normal, not t, quantiles). Over 200 trials the
    # rate's sd is sqrt(0.95 * 0.05 / 200) = 0.0154, so 0.88 is ~4 sd below 0.94 (a false failure has
    # probability < 1e-4; the seeds are fixed anyway). A wrong interval (tasks not resampled, seeds only:
    # zero width) covers ~0. The upper bound 0.99 catches intervals far too wide: P(>= 199/200) ~ 4e-4.
    hits, trials = 0, 200
    for trial in range(trials):
        rng = np.random.default_rng(1000 + trial)
        o = rng.uniform(-0.1, 0.1)
        p = rng.uniform(0.2, 0.8, size=120) + o
        R = (rng.random((1, 120, 2)) < p[None, :, None]).astype(float)
        ci = curve_ci(R, n_boot=500, seed=trial)[0]
        hits += ci["lo"] <= 0.5 + o <= ci["hi"]
    assert 0.88 <= hits / trials <= 0.99


# --- generations to threshold ---------------------------------------------------------------------

def test_generations_to_threshold():
    gens = [0, 10, 20, 30]
    means = np.array([0.1, 0.3, 0.5, 0.7])
    assert generations_to_threshold(means, gens, 0.5) == 20  # reaching it exactly counts
    assert generations_to_threshold(means, gens, 0.55) == 30
    assert generations_to_threshold(means, gens, 0.3 + 1e-13) == 10  # float noise is forgiven
    assert generations_to_threshold(means, gens, 0.8) is None
    with pytest.raises(ValueError):
        generations_to_threshold(means, gens[:3], 0.5)


def test_generations_to_threshold_ci():
    gens = [0, 10, 20, 30]
    R = np.zeros((3, 50, 4))
    R[:, :, 2:] = 1.0  # every task jumps to 1 at point 2: every replicate crosses at generation 20
    assert generations_to_threshold_ci(R, gens, 0.5, n_boot=300) == {
        "point": 20, "lo": 20, "hi": 20, "never_frac": 0.0}
    assert generations_to_threshold_ci(R, gens, 1.01, n_boot=300) == {
        "point": None, "lo": None, "hi": None, "never_frac": 1.0}
    # Half the tasks solved only at the end: the plain mean reaches 0.5 there, about half the
    # replicates never do, so the upper bound is "not within the budget".
    R = np.zeros((3, 50, 4))
    R[:, :25, 3] = 1.0
    ci = generations_to_threshold_ci(R, gens, 0.5, n_boot=1000)
    assert ci["point"] == 30 and ci["lo"] == 30 and ci["hi"] is None
    assert 0.3 < ci["never_frac"] < 0.7


# --- paired difference ----------------------------------------------------------------------------

def test_paired_identical_inputs():
    A = np.random.default_rng(0).random((4, 30))
    out = paired_difference(A, A.copy(), n_boot=500)
    assert out == {"diff": 0.0, "lo": 0.0, "hi": 0.0, "p": 1.0}


def test_paired_clear_shift():
    rng = np.random.default_rng(1)
    A = (rng.random((5, 100)) < 0.6).astype(float)
    B = A.copy()
    B[:, rng.choice(100, 30, replace=False)] = 0.0  # 30% of the tasks fail on every seed
    out = paired_difference(A, B, n_boot=2000)
    assert out["diff"] == pytest.approx(A.mean() - B.mean())
    assert out["diff"] > 0.1 and out["lo"] > 0 and out["p"] < 0.01
    back = paired_difference(B, A, n_boot=2000)
    assert back["hi"] < 0 and back["p"] < 0.01


def test_pairing_matters():
    # Tasks differ widely in difficulty, B is A lowered by 0.03 (plus small noise): resampling A and B
    # independently drowns the shift in task variance, the paired bootstrap does not.
    rng = np.random.default_rng(2)
    A = np.clip(rng.uniform(0.1, 0.9, size=(1, 60)) + rng.normal(0, 0.02, size=(4, 60)), 0, 1)
    B = np.clip(A - 0.03 + rng.normal(0, 0.01, size=A.shape), 0, 1)
    paired = paired_difference(A, B, n_boot=1000)
    assert paired["lo"] > 0 and paired["p"] < 0.01
    unpaired = bootstrap_means(A[:, :, None], 1000, seed=0) - bootstrap_means(B[:, :, None], 1000, seed=1)
    lo, hi = np.quantile(unpaired, [0.025, 0.975])
    assert lo < 0 < hi


def test_paired_needs_equal_shapes():
    with pytest.raises(ValueError, match="equal shapes"):
        paired_difference(np.zeros((3, 10)), np.zeros((2, 10)))


def test_auc_skips_the_first_point():
    R = np.array([[[0.9, 0.2, 0.4], [0.0, 1.0, 1.0]]])
    assert np.allclose(auc(R), [[0.3, 1.0]])
    with pytest.raises(ValueError):
        auc(R[:, :, :1])


# --- reading and stacking runs --------------------------------------------------------------------

def test_stack_runs_defaults_and_errors():
    run0 = {0: {"a": 0.0, "b": 0.5, "c": 1.0}, 10: {"a": 1.0, "b": 0.5, "c": 1.0}, 20: {"a": 1.0}}
    run1 = {0: {"a": 0.25, "b": 0.0}, 10: {"a": 0.75, "b": 1.0}}
    R, gens, tasks = stack_runs([run0, run1])
    assert gens == [0, 10] and tasks == ["a", "b"]  # only what every run has
    assert R.shape == (2, 2, 2)
    assert R[1, :, 1].tolist() == [0.75, 1.0] and R[0, :, 0].tolist() == [0.0, 0.5]
    with pytest.raises(ValueError, match="run 1 has no evaluation at generations \\[20\\]"):
        stack_runs([run0, run1], gens=[0, 20])
    with pytest.raises(ValueError, match="run 1 at generations 0 lacks tasks \\['c'\\]"):
        stack_runs([run0, run1], tasks=["a", "c"])
    with pytest.raises(ValueError):
        stack_runs([])


def test_task_rewards_reads_eval_records(tmp_path):
    def ep(task, reward, gen, phase="eval"):
        meta = {"phase": phase, "generations": gen}
        return Episode("lopd/shop-v0", task, reward=reward, meta=meta).to_json()

    lines = [ep("a", 1.0, 0), ep("a", 0.0, 0),  # two episodes of one task: their mean
             ep("b", 0.5, 0), ep("a", 1.0, 10),
             ep("b", 1.0, 10, phase="train"),  # not an eval record
             '{"broken json',  # malformed: skipped
             ""]
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert task_rewards(path) == {0: {"a": 0.5, "b": 0.5}, 10: {"a": 1.0}}
    R, gens, tasks = stack_runs([task_rewards(path)], gens=[0])
    assert R.tolist() == [[[0.5], [0.5]]] and tasks == ["a", "b"]
