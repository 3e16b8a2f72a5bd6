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
import os
import pkgutil
import warnings
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
load_errors: dict[str, str] = {}
"""Sub-packages whose registration failed to import, with the reason (a test asserts it is empty)."""


def load_all() -> None:
    """Import every ``envs.<pkg>.registration`` module (idempotent).

    A package whose registration fails to import is reported with a warning and in
    :data:`load_errors`; the other packages' envs stay usable.
    """
    global _loaded
    if _loaded:
        return
    _loaded = True
    # envs' own folder, found from here: importing the package back would make a cycle
    for mod in sorted(pkgutil.iter_modules([os.path.dirname(__file__)]), key=lambda m: m.name):
        if not mod.ispkg:
            continue
        name = f"envs.{mod.name}.registration"
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name != name:
                _fail(mod.name, e)
        except Exception as e:  # noqa: BLE001 - one broken benchmark must not hide the others
            _fail(mod.name, e)


def _fail(pkg: str, e: Exception) -> None:
    load_errors[pkg] = f"{type(e).__name__}: {e}"
    warnings.warn(f"envs.{pkg} registration failed: {load_errors[pkg]}", stacklevel=3)
