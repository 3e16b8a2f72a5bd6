"""The usage examples in the micro world's docstrings run."""

import doctest

import pytest

from envs.micro import env, expert, sft, world


@pytest.mark.parametrize("module", [env, expert, sft, world], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
