"""Importing BFCL's simulated API classes: a missing bfcl-eval wheel is a clear error naming the fix."""
import sys
import types

import pytest

from envs.bfcl import execution
from envs.bfcl.execution import INSTALL_HINT, api_class


@pytest.fixture
def fresh_cache():
    api_class.cache_clear()
    yield
    api_class.cache_clear()


def test_missing_bfcl_eval_names_the_install_command(monkeypatch, fresh_cache):
    for mod in [m for m in sys.modules if m == "bfcl_eval" or m.startswith("bfcl_eval.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "bfcl_eval", None)  # makes `import bfcl_eval` fail
    with pytest.raises(ImportError, match="pip install --no-deps bfcl-eval==2025.8.6.2") as info:
        api_class("MathAPI")
    assert INSTALL_HINT in str(info.value) and "'bfcl_eval" in str(info.value)
    assert isinstance(info.value.__cause__, ModuleNotFoundError)


def test_a_missing_dependency_of_the_wheel_is_raised_as_it_is(monkeypatch, fresh_cache):
    def import_module(name):
        raise ModuleNotFoundError("No module named 'numpy'", name="numpy")

    monkeypatch.setattr(execution, "importlib", types.SimpleNamespace(import_module=import_module))
    with pytest.raises(ModuleNotFoundError, match="numpy") as info:
        api_class("MathAPI")
    assert INSTALL_HINT not in str(info.value)


def test_unknown_class_is_a_key_error():
    with pytest.raises(KeyError):
        api_class("NoSuchAPI")
