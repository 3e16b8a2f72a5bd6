"""Registration of every LOPD Gym environment with Gymnasium.

Each sub-package of ``envs`` that ships environments has a ``registration.py`` that calls
:func:`register_env` with string entry points (so registering imports nothing heavy). Importing
``envs`` runs them all, after which ``gymnasium.make("lopd/shop-v0")`` works::

    import gymnasium as gym
    import envs  # noqa: F401  (registers the lopd/* ids)
    env = gym.make("lopd/shop-v0")

Envs from outside the repo: ``mypkg:lopd/todo-v0`` imports ``mypkg`` first (Gymnasium's convention), and
an installed package may declare a module (imported) or a function (called) in the entry-point group
:data:`ENTRY_POINT_GROUP`, loaded with ours. :func:`resolve_env_id` finds both.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import warnings
from typing import Any

import gymnasium as gym

NAMESPACE = "lopd"
ENTRY_POINT_GROUP = "lopd_gym.envs"
"""Entry points of this group register a package's own envs: ``todo = "mypkg.registration"``."""
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
    load_plugins()


def _fail(pkg: str, e: Exception, what: str | None = None) -> None:
    load_errors[pkg] = f"{type(e).__name__}: {e}"
    warnings.warn(f"{what or f'envs.{pkg} registration'} failed: {load_errors[pkg]}", stacklevel=3)


_plugins: set[str] = set()


def load_plugins() -> None:
    """Load the :data:`ENTRY_POINT_GROUP` entry points not loaded yet: a module is imported (its import
    registers), a function is called. A broken one is reported like a broken sub-package."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        key = f"{ep.name} = {ep.value}"
        if key in _plugins:
            continue
        _plugins.add(key)
        try:
            obj = ep.load()
            if callable(obj):
                obj()
        except Exception as e:  # noqa: BLE001 - a broken plugin must not hide the other envs
            _fail(f"{ENTRY_POINT_GROUP}:{ep.name}", e, f"entry point {key!r} ({ENTRY_POINT_GROUP})")


class UnknownEnvError(KeyError):
    """An env id that nothing registers (a KeyError whose text reads as a sentence)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def resolve_env_id(name: str) -> str:
    """The registered id ``name`` stands for: ``shop-v0`` is ``lopd/shop-v0``; ``mypkg:lopd/todo-v0``
    imports ``mypkg`` first (as ``gymnasium.make`` does) and is ``lopd/todo-v0``; the entry points of
    :data:`ENTRY_POINT_GROUP` are loaded too (again, for ones installed since)."""
    module, sep, env_id = name.rpartition(":")
    if sep:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as e:
            if not (e.name and (module == e.name or module.startswith(e.name + "."))):
                raise  # the module is there; something it imports is not
            raise UnknownEnvError(f"env {name!r}: no module {module!r} to import (is its package installed, "
                                  "or on PYTHONPATH?)") from None
    load_all()
    for _ in range(2):
        for cand in (env_id, f"{NAMESPACE}/{env_id}"):
            if cand in gym.registry:
                return cand
        load_plugins()
    raise UnknownEnvError(f"unknown env {name!r}; registered: {', '.join(registered_ids())} (an env of your own "
                          f"package: MODULE:ID, e.g. mypkg:lopd/todo-v0, or the {ENTRY_POINT_GROUP} entry points)")


class EnvKwargsError(ValueError):
    """Keyword arguments an env's constructor does not take (a user's mistake, e.g. in ``--env-kwargs``)."""


def _accepted_kwargs(env_id: str) -> list[str]:
    """The keyword names the constructors of ``env_id``'s class take, along its ``**kwargs`` chain."""
    import inspect

    from gymnasium.envs.registration import load_env_creator

    spec = gym.registry[env_id]
    creator = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
    names: list[str] = []
    for cls in getattr(creator, "__mro__", [creator]):
        init = cls.__dict__.get("__init__") if isinstance(cls, type) else cls
        if init is None:
            continue
        params = inspect.signature(init).parameters.values()
        names += [p.name for p in params
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"]
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return sorted(set(names))


def make(env_id: str, **kwargs: Any) -> gym.Env:
    """``gym.make(env_id, **kwargs)``, where a keyword the env does not take is an :class:`EnvKwargsError`
    naming it and the ones it takes, not a TypeError from inside the env's constructor."""
    import re

    try:
        return gym.make(env_id, **kwargs)
    except TypeError as e:
        m = re.search(r"unexpected keyword argument '([^']+)'", str(e))
        if not m or m.group(1) not in kwargs:
            raise
        raise EnvKwargsError(f"{env_id} takes no keyword argument {m.group(1)!r}; it takes: "
                             f"{', '.join(_accepted_kwargs(env_id)) or 'none'}") from None
