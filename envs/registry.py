"""Registration of every LOPD Gym environment with Gymnasium.

Each sub-package of ``envs`` that ships environments has a ``registration.py`` that calls
:func:`register_env` with string entry points (so registering imports nothing heavy). Importing
``envs`` runs them all, after which ``gymnasium.make("lopd/shop-v0")`` works::

    import gymnasium as gym
    import envs  # noqa: F401  (registers the lopd/* ids)
    env = gym.make("lopd/shop-v0")
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import gymnasium as gym

NAMESPACE = "lopd"
_IDS: list[str] = []


def register_env(env_id: str, entry_point: str, **kwargs: Any) -> None:
    """Register ``lopd/<name>-v<N>`` with Gymnasium. ``kwargs`` go to the env constructor."""
    if not env_id.startswith(f"{NAMESPACE}/"):
        raise ValueError(f"env ids live in the '{NAMESPACE}/' namespace, got {env_id!r}")
    if env_id in gym.registry:
        return
    # Our envs bound their own steps (ToolEnv.max_steps), so no TimeLimit wrapper.
    gym.register(id=env_id, entry_point=entry_point, kwargs=kwargs)
    _IDS.append(env_id)


def registered_ids() -> list[str]:
    """Every env id this project registered, in registration order."""
    load_all()
    return list(_IDS)


_loaded = False


def load_all() -> None:
    """Import every ``envs.<pkg>.registration`` module (idempotent)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    import envs

    for mod in sorted(pkgutil.iter_modules(envs.__path__), key=lambda m: m.name):
        if mod.ispkg:
            try:
                importlib.import_module(f"envs.{mod.name}.registration")
            except ModuleNotFoundError as e:
                if e.name != f"envs.{mod.name}.registration":
                    raise
