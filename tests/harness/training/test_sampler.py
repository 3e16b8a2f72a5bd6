"""harness/training/sampler.py: the seeded task order and derived seeds."""

from __future__ import annotations

import json

from harness.training.sampler import EpochSampler, derive_seed


def test_epoch_sampler_is_seeded_without_replacement_and_resumable():
    items = [f"t{i}" for i in range(7)]
    s = EpochSampler(items, seed=3)
    first = s.take(5) + s.take(2)
    assert sorted(first) == sorted(items) and s.epoch == 0  # one epoch = each item once
    nxt = s.take(3)
    assert s.epoch == 1 and len(set(nxt)) == 3
    state = s.state_dict()
    rest = s.take(10)
    s2 = EpochSampler(items, seed=3)
    s2.load_state_dict(json.loads(json.dumps(state)))
    assert s2.take(10) == rest
    assert EpochSampler(items, seed=3).take(7) == first and EpochSampler(items, seed=4).take(7) != first
    assert derive_seed(1, "train", 2) == derive_seed(1, "train", 2) != derive_seed(1, "train", 3)
