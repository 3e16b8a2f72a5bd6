"""Fixtures of the learner tests."""

from __future__ import annotations

import pytest
import torch
from learner_fixtures import write_shop_expert_traces


@pytest.fixture(scope="session")
def shop_traces(tmp_path_factory):
    return write_shop_expert_traces(tmp_path_factory.mktemp("traces") / "expert.jsonl")


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread: the tiny model's ops are too small to gain from more, and the CI CPU is shared."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
