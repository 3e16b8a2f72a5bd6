"""The training data order: seeded per-epoch permutations of the tasks, without replacement, and the seeds
derived for every stream of randomness (a run's order, its cold start's, each episode's sampling).

    sampler = EpochSampler(task_ids, seed=derive_seed(cfg.seed, "order"))
    batch = sampler.take(8)        # the next 8 ids; the next epoch's permutation starts when one runs out
    state = sampler.state_dict()   # saved in each checkpoint, so a resumed run sees the same order
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np


def derive_seed(*parts: Any) -> int:
    """A 31-bit seed from any parts (stable across processes and Python versions)."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "little") % (2 ** 31)


class EpochSampler:
    """Items without replacement from a seeded per-epoch permutation; epochs follow each other.

    >>> s = EpochSampler(["a", "b", "c"], seed=0)
    >>> sorted(s.take(3)) == ["a", "b", "c"] and len(s.take(2)) == 2 and s.epoch == 1
    True
    """

    def __init__(self, items: list[str], seed: int):
        if not items:
            raise ValueError("nothing to sample from: the training split has no tasks (or the dataset is empty)")
        self.items, self.seed = list(items), seed
        self.epoch, self.pos = 0, 0
        self.order = self._order(0)

    def _order(self, epoch: int) -> list[str]:
        perm = np.random.default_rng([self.seed, epoch]).permutation(len(self.items))
        return [self.items[i] for i in perm]

    def take(self, n: int) -> list[str]:
        out = []
        while len(out) < n:
            if self.pos == len(self.order):
                self.epoch, self.pos = self.epoch + 1, 0
                self.order = self._order(self.epoch)
            k = min(n - len(out), len(self.order) - self.pos)
            out += self.order[self.pos:self.pos + k]
            self.pos += k
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "pos": self.pos, "order": list(self.order)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch, self.pos, self.order = int(state["epoch"]), int(state["pos"]), list(state["order"])
