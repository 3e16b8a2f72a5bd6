"""Run EnvScaler's environment classes and check functions the way the authors' runner does.

- ``new_instance``: exec the env's ``env_class_code`` into a fresh module (one per episode, so
  module globals and class attributes never leak between episodes; the compiled code is cached),
  construct the class with a deep copy of ``init_config`` (falling back to a no-argument
  constructor on TypeError), then set every ``init_config`` key as an attribute.
- ``state_of``: ``deepcopy(vars(instance))`` without dunder names.
- ``score_checklist``: each ``check_func`` source is exec'd in fresh globals that hold the builtins
  and a copy of the initial state as ``initial_state``; a check passes only when it returns a real
  ``bool`` True. The reward is the fraction of passing checks, rounded to 4 places as the authors do.

>>> code = "class Counter:\\n    def __init__(self, init_config):\\n        self.n = 0\\n"
>>> inst = new_instance("env_x", code, "Counter", {"n": 2})
>>> state_of(inst)
{'n': 2}
>>> check = {"check_func": "def check_func(s):\\n    return s['n'] == 2"}
>>> score_checklist([check], {}, state_of(inst)).reward
1.0
"""

from __future__ import annotations

import builtins
import copy
import hashlib
import linecache
import types
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

MODULE_NAME = "dynamic_env"  # the authors' module name; classes report it as __module__


class EnvClassError(RuntimeError):
    """An env's class code does not compile, run, define its class, or construct."""


@lru_cache(maxsize=512)
def _compile(code: str, filename: str) -> types.CodeType:
    # Register the source so tracebacks through env methods show real lines.
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    return compile(code, filename, "exec")


def _filename(env_id: str, code: str) -> str:
    return f"<envscaler {env_id} {hashlib.sha1(code.encode()).hexdigest()[:8]}>"


def load_class(env_id: str, code: str, class_name: str) -> type:
    """Exec ``code`` into a fresh module and return its class ``class_name``."""
    try:
        compiled = _compile(code, _filename(env_id, code))
    except (SyntaxError, ValueError) as e:
        raise EnvClassError(
            f"env {env_id}: env_class_code does not compile ({type(e).__name__}: {e})"
        ) from None
    module = types.ModuleType(MODULE_NAME)
    try:
        exec(compiled, module.__dict__)
    except Exception as e:
        raise EnvClassError(
            f"env {env_id}: env_class_code raised while loading ({type(e).__name__}: {e})"
        ) from e
    cls = module.__dict__.get(class_name)
    if not isinstance(cls, type):
        raise EnvClassError(f"env {env_id}: class {class_name!r} not found in env_class_code")
    return cls


def new_instance(env_id: str, code: str, class_name: str, init_config: dict[str, Any] | None) -> Any:
    """A fresh instance of the env class with ``init_config`` applied (authors' init_env_instance)."""
    cls = load_class(env_id, code, class_name)
    config = copy.deepcopy(init_config)  # one copy, shared by the constructor and the attributes
    try:
        try:
            inst = cls(config if config and isinstance(config, dict) else {})
        except TypeError:
            inst = cls()
        for key, value in (config or {}).items():
            setattr(inst, key, value)
    except Exception as e:
        raise EnvClassError(
            f"env {env_id}: constructing {class_name} failed ({type(e).__name__}: {e})"
        ) from e
    return inst


def state_of(instance: Any) -> dict[str, Any]:
    """The instance's state: a deep copy of its attributes, dunder names left out."""
    return copy.deepcopy(
        {k: v for k, v in vars(instance).items() if not (k.startswith("__") and k.endswith("__"))}
    )


@dataclass(frozen=True)
class CheckResult:
    """One check_func's outcome, as the authors record it."""

    check_item: str
    """The check's natural-language description ('' if the record has none)."""
    success: bool
    """The function ran and returned a bool."""
    result: bool | None
    """What it returned (None when it raised or returned a non-bool)."""
    error: str | None = None
    """Why it did not run cleanly."""


@dataclass(frozen=True)
class ChecklistScore:
    """The reward and every check's outcome."""

    reward: float
    results: list[CheckResult] = field(default_factory=list)

    @property
    def n_passed(self) -> int:
        return sum(r.result is True for r in self.results)


@lru_cache(maxsize=8192)
def _compile_check(code: str) -> types.CodeType:
    return compile(code, "<check_func>", "exec")


def run_check(
    code: Any, initial_state: dict[str, Any], final_state: dict[str, Any], check_item: str = ""
) -> CheckResult:
    """Exec one check_func source in fresh globals and call it on ``final_state``. Never raises."""
    try:
        if not isinstance(code, str):
            raise TypeError(f"check_func must be source text, got {type(code).__name__}")
        glb: dict[str, Any] = {"__builtins__": builtins}
        if "initial_state" in code:  # only a check that names it can read it; skip the copy otherwise
            glb["initial_state"] = copy.deepcopy(initial_state)
        exec(_compile_check(code), glb)
        fn = glb.get("check_func")
        if not callable(fn):
            return CheckResult(check_item, False, None, "Function 'check_func' not found.")
        value = fn(final_state)
    except BaseException as e:  # noqa: BLE001 - a check may even call exit(); it only fails
        if isinstance(e, KeyboardInterrupt):
            raise
        return CheckResult(check_item, False, None, f"{type(e).__name__}: {e}"[:500])
    if not isinstance(value, bool):  # numpy.bool_, 1, "yes": all count 0, as in the authors' runner
        return CheckResult(
            check_item, False, None, f"Function did not return a boolean (got {type(value).__name__})."
        )
    return CheckResult(check_item, True, value)


def score_checklist(
    checklist: list[dict[str, Any]], initial_state: dict[str, Any], final_state: dict[str, Any]
) -> ChecklistScore:
    """Fraction of checks that return True, rounded to 4 places.

    Every check sees the same ``final_state`` object, as in the authors' runner. An empty checklist
    scores 0.0 (the authors' runner divides by zero there; we call nothing verified a failure).
    """
    results = [
        run_check(c.get("check_func"), initial_state, final_state, str(c.get("check_item", "")))
        for c in checklist
    ]
    if not results:
        return ChecklistScore(0.0, [])
    return ChecklistScore(round(sum(r.result is True for r in results) / len(results), 4), results)
