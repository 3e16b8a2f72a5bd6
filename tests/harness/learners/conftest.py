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


@pytest.fixture
def distill_prompts(monkeypatch):
    """``spy(module)`` wraps ``module.distill_update`` (a learner module's) and returns a dict whose
    ``"prompts"`` is, after each call, the teacher prompts that call was given."""

    def spy(module):
        seen = {}
        real = module.distill_update

        def recording(ctx, rollouts, prompts, *a):
            seen["prompts"] = prompts
            return real(ctx, rollouts, prompts, *a)

        monkeypatch.setattr(module, "distill_update", recording)
        return seen

    return spy
