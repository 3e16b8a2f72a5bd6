import pytest
import torch

from harness.models import build_tiny_model


@pytest.fixture(scope="session")
def tiny():
    """(model, tokenizer) of the 1M preset, fp32, fixed seed."""
    return build_tiny_model("1m", seed=0)


@pytest.fixture(scope="session")
def prompts():
    g = torch.Generator().manual_seed(0)
    return [torch.randint(10, 900, (n,), generator=g).tolist() for n in (5, 17, 9, 12)]


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models run fastest on one thread; more threads spin against each other on a shared CPU."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
