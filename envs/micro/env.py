"""``MicroEnv``: the micro world, run by the EnvScaler env unchanged (only where the records lie differs)::

import envs, gymnasium as gym
env = gym.make("lopd/micro-v0", split="eval")       # builds and caches the world on first use
prompt, info = env.reset(seed=0)
"""

from __future__ import annotations

import os

from envs.envscaler.env import EnvScalerEnv, PathsArg
from envs.micro.world import DEFAULT_N_EVAL, DEFAULT_N_TRAIN, cached_world


class MicroEnv(EnvScalerEnv):
    """EnvScaler semantics over the generated world ``(seed, n_train, n_eval)``.

    Args:
        seed: the world's seed.
        n_train, n_eval: tasks per split.
        cache_dir: where built worlds are kept (default ``$LOPD_CACHE_DIR`` or ``~/.cache/lopd``).
        split: "train", "eval" or None (both). Other keyword arguments go to :class:`EnvScalerEnv`.
    """

    def __init__(
        self,
        seed: int = 0,
        n_train: int = DEFAULT_N_TRAIN,
        n_eval: int = DEFAULT_N_EVAL,
        *,
        cache_dir: str | os.PathLike | None = None,
        **kwargs,
    ):
        super().__init__(None, None, **kwargs)
        self.world_seed, self.n_train, self.n_eval, self.cache_dir = seed, n_train, n_eval, cache_dir

    def _paths(self) -> tuple[PathsArg, PathsArg]:
        files = cached_world(self.world_seed, self.n_train, self.n_eval, self.cache_dir)
        return files.envs, files.scenarios
