"""Fixtures of the learner tests."""

from __future__ import annotations

import pytest
from learner_fixtures import write_shop_expert_traces


@pytest.fixture(scope="session")
def shop_traces(tmp_path_factory):
    return write_shop_expert_traces(tmp_path_factory.mktemp("traces") / "expert.jsonl")


@pytest.fixture(autouse=True)
def _one_thread_here(one_thread):
    """Every test in this folder runs on one torch thread (tests/conftest.py)."""
