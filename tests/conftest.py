"""Shared test settings: deterministic hypothesis profile, offline model hubs, the one_thread fixture."""
import os

import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

settings.register_profile("ci", derandomize=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile("ci")


@pytest.fixture
def one_thread():
    """One torch intra-op thread for the test: tiny models' ops gain nothing from more, and on the shared
    2-core CI CPU extra threads spin against each other. Use it with
    ``pytestmark = pytest.mark.usefixtures("one_thread")`` or from an autouse fixture in a conftest."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
