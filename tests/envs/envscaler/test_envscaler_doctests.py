"""The usage examples in the EnvScaler modules' docstrings run."""

import doctest

import pytest

from envs.envscaler import env, metrics, parse, records, runtime


@pytest.mark.parametrize("module", [env, metrics, parse, records, runtime], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
