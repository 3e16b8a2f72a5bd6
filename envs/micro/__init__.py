"""The micro world: six procedurally generated tool-use domains in EnvScaler's record format.

- :mod:`envs.micro.domains`: shop, bank, library, calendar, files, travel (class, tasks, solver).
- :mod:`envs.micro.world`: ``build_world(seed, n_train, n_eval, out_dir)`` and the cache.
- :mod:`envs.micro.env`: ``MicroEnv`` (``lopd/micro-v0``), the EnvScaler env over the built records.
- :mod:`envs.micro.expert`: scripted solvers played through the env; the noisy expert.
- :mod:`envs.micro.sft`: experience text, referenced trajectories, the SFT corpus.

See docs/MICRO.md.
"""

from envs.micro.domains import DOMAINS
from envs.micro.env import MicroEnv
from envs.micro.expert import Trajectory, choose_mistake, expert_success, noisy_expert, run_solver
from envs.micro.sft import DEFAULT_REFERENCE_FRAMING, referenced_trajectory, render_experience, sft_corpus
from envs.micro.world import WorldFiles, build_world, cached_world, generate_world

__all__ = [
    "DEFAULT_REFERENCE_FRAMING",
    "DOMAINS",
    "MicroEnv",
    "Trajectory",
    "WorldFiles",
    "build_world",
    "cached_world",
    "choose_mistake",
    "expert_success",
    "generate_world",
    "noisy_expert",
    "referenced_trajectory",
    "render_experience",
    "run_solver",
    "sft_corpus",
]
