"""Bootstrap intervals and paired tests for comparing learners over seeds and held-out tasks.

Layout everywhere: ``R`` of shape ``[S, T, P]``, the reward (in [0, 1]) of training seed ``s`` on
held-out task ``t`` at budget point ``p``. Learners share the task order and the point grid, and seed
``i`` of one learner is paired with seed ``i`` of another. A replicate resamples seeds *and* tasks with
replacement (two-level bootstrap): both are finite samples, so both add to the uncertainty::

    runs = [task_rewards(d / "traces.jsonl") for d in run_dirs_of_learner_a]
    RA, gens, tasks = stack_runs(runs)
    curve_ci(RA)                                   # [{"mean", "lo", "hi"}, ...] per point
    generations_to_threshold_ci(RA, gens, 0.5)     # {"point", "lo", "hi", "never_frac"}
    paired_difference(auc(RA), auc(RB))            # {"diff", "lo", "hi", "p"}
"""
from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

import numpy as np

_EPS = 1e-12


def task_rewards(traces_path: str | os.PathLike) -> dict[int, dict[str, float]]:
    """Mean eval reward per task at each evaluation point: ``{generations: {task_id: mean}}``.

    Reads ``traces.jsonl`` skipping unreadable lines; only records with ``meta.phase == "eval"`` count.
    """
    from envs.trace import iter_records

    sums: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    for _, rec in iter_records(traces_path, on_error="skip"):
        meta = rec.get("meta") or {}
        if meta.get("phase") != "eval":
            continue
        acc = sums[int(meta["generations"])][str(rec["task_id"])]
        acc[0] += float(rec["reward"])
        acc[1] += 1.0
    return {g: {t: s / n for t, (s, n) in per.items()} for g, per in sorted(sums.items())}


def stack_runs(runs: list[dict[int, dict[str, float]]], gens: list[int] | None = None,
               tasks: list[str] | None = None) -> tuple[np.ndarray, list[int], list[str]]:
    """Stack several runs' :func:`task_rewards` into ``R [S, T, P]``; returns ``(R, gens, tasks)``.

    ``gens`` defaults to the points every run has, ``tasks`` to the tasks present at every (run, point),
    both sorted. A run lacking a requested point or task raises ValueError (never a silent NaN).
    """
    if not runs:
        raise ValueError("stack_runs: no runs given")
    if gens is None:
        gens = sorted(set.intersection(*(set(r) for r in runs)))
    if not gens:
        raise ValueError("stack_runs: the runs share no evaluation point")
    for i, run in enumerate(runs):
        missing = [g for g in gens if g not in run]
        if missing:
            raise ValueError(f"stack_runs: run {i} has no evaluation at generations {missing}")
    if tasks is None:
        tasks = sorted(set.intersection(*(set(run[g]) for run in runs for g in gens)))
    if not tasks:
        raise ValueError("stack_runs: no task is present in every run at every point")
    R = np.empty((len(runs), len(tasks), len(gens)))
    for i, run in enumerate(runs):
        for k, g in enumerate(gens):
            missing = [t for t in tasks if t not in run[g]]
            if missing:
                raise ValueError(f"stack_runs: run {i} at generations {g} lacks tasks {missing[:5]}"
                                 f"{' ...' if len(missing) > 5 else ''}")
            R[i, :, k] = [run[g][t] for t in tasks]
    return R, list(gens), list(tasks)


def _counts(rng: np.random.Generator, n_boot: int, n: int) -> np.ndarray:
    """How often each of ``n`` items is drawn in each replicate: ``[n_boot, n]`` (rows sum to ``n``)."""
    idx = rng.integers(0, n, size=(n_boot, n)) + n * np.arange(n_boot)[:, None]
    return np.bincount(idx.ravel(), minlength=n_boot * n).reshape(n_boot, n).astype(float)


def _check(R: np.ndarray, ndim: int) -> np.ndarray:
    R = np.asarray(R, dtype=float)
    if R.ndim != ndim or 0 in R.shape:
        raise ValueError(f"expected a non-empty array with {ndim} dimensions, got shape {R.shape}")
    if not np.isfinite(R).all():
        raise ValueError("rewards must be finite (no NaN)")
    return R


def bootstrap_means(R: np.ndarray, n_boot: int = 2000, seed: int = 0) -> np.ndarray:
    """``[n_boot, P]`` replicate means of ``R [S, T, P]`` over resampled seeds and tasks.

    One task resample per replicate is shared by all its seeds and points (the tasks are one fixed
    sample of the task distribution). With ``S == 1`` only the tasks vary.
    """
    R = _check(R, 3)
    S, T, _ = R.shape
    rng = np.random.default_rng(seed)
    # The mean over drawn (seed, task) pairs is a count-weighted sum: no [n_boot, S, T, P] array.
    cs = _counts(rng, n_boot, S) if S > 1 else np.ones((n_boot, 1))
    ct = _counts(rng, n_boot, T)
    per_seed = np.einsum("bt,stp->bsp", ct, R)
    return np.einsum("bs,bsp->bp", cs, per_seed) / (S * T)


def _bounds(level: float) -> tuple[float, float]:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return (1 - level) / 2, (1 + level) / 2


def curve_ci(R: np.ndarray, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> list[dict[str, float]]:
    """Per point ``{"mean", "lo", "hi"}``: the plain mean and the percentile interval of the replicates."""
    R = _check(R, 3)
    boot = bootstrap_means(R, n_boot, seed)
    lo, hi = np.quantile(boot, _bounds(level), axis=0)
    return [{"mean": float(m), "lo": float(a), "hi": float(b)}
            for m, a, b in zip(R.mean(axis=(0, 1)), lo, hi)]


def _first_reach(means: np.ndarray, gens: np.ndarray, threshold: float) -> np.ndarray:
    """Generations at which each row of ``means [n, P]`` first reaches ``threshold`` (+inf: never)."""
    reached = means >= threshold - _EPS
    first = gens[reached.argmax(axis=1)].astype(float)
    return np.where(reached.any(axis=1), first, np.inf)


def generations_to_threshold(means_per_point: np.ndarray, gens: list[int], threshold: float) -> int | None:
    """The first point of ``gens`` whose mean is ``>= threshold`` (None: never within the budget)."""
    means = np.asarray(means_per_point, dtype=float)
    if means.shape != (len(gens),):
        raise ValueError(f"{means.shape[0] if means.ndim else 0} means for {len(gens)} points")
    g = _first_reach(means[None], np.asarray(gens), threshold)[0]
    return None if np.isinf(g) else int(g)


def generations_to_threshold_ci(R: np.ndarray, gens: list[int], threshold: float, n_boot: int = 2000,
                                seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """``{"point", "lo", "hi", "never_frac"}`` for the generations needed to reach ``threshold``.

    Replicates that never reach it count as +inf; an infinite bound is reported as None ("not reached
    within the budget"). ``lo``/``hi`` use the lower/higher order statistic, so each is a grid point.
    """
    R = _check(R, 3)
    if R.shape[2] != len(gens):
        raise ValueError(f"R has {R.shape[2]} points but {len(gens)} generations were given")
    reach = _first_reach(bootstrap_means(R, n_boot, seed), np.asarray(gens), threshold)
    a, b = _bounds(level)
    # Order statistics, not interpolation: interpolating towards inf gives inf*0 = NaN.
    lo, hi = np.quantile(reach, a, method="lower"), np.quantile(reach, b, method="higher")
    return {"point": generations_to_threshold(R.mean(axis=(0, 1)), gens, threshold),
            "lo": None if np.isinf(lo) else int(lo), "hi": None if np.isinf(hi) else int(hi),
            "never_frac": float(np.isinf(reach).mean())}


def paired_difference(RA: np.ndarray, RB: np.ndarray, n_boot: int = 2000, seed: int = 0,
                      level: float = 0.95) -> dict[str, float]:
    """Mean difference A - B of ``[S, T]`` arrays with a paired two-level bootstrap.

    Each replicate draws the same seed and task indices for A and B (equivalently, resamples A - B).
    Percentile method, no centring: ``lo``/``hi`` are quantiles of the replicate differences and
    ``p = min(1, 2 * min(share <= 0, share >= 0))`` (differences within 1e-12 of 0 count as 0).
    """
    RA, RB = _check(RA, 2), _check(RB, 2)
    if RA.shape != RB.shape:
        raise ValueError(f"paired_difference needs equal shapes, got {RA.shape} and {RB.shape}")
    boot = bootstrap_means((RA - RB)[:, :, None], n_boot, seed)[:, 0]
    lo, hi = np.quantile(boot, _bounds(level))
    p = min(1.0, 2 * min(float(np.mean(boot <= _EPS)), float(np.mean(boot >= -_EPS))))
    return {"diff": float(RA.mean() - RB.mean()), "lo": float(lo), "hi": float(hi), "p": p}


def auc(R: np.ndarray) -> np.ndarray:
    """``[S, T]`` mean over the points after the first (the untrained model, same for every learner)."""
    R = _check(R, 3)
    if R.shape[2] < 2:
        raise ValueError("auc needs at least two points (the first is the untrained model)")
    return R[:, :, 1:].mean(axis=2)
