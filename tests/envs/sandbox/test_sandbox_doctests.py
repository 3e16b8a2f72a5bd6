"""The usage examples in the sandbox modules' docstrings run."""
import doctest

import pytest

import envs.sandbox.config
import envs.sandbox.guest


@pytest.mark.parametrize("module", [envs.sandbox.config, envs.sandbox.guest])
def test_doctests(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
