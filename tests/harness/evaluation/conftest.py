"""The evaluation tests' shared model: one tiny saved model folder for the session."""

import pytest

from harness.models import build_tiny_model, save_pretrained


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "tiny-1m"
    save_pretrained(*build_tiny_model("1m", seed=0), path)
    return str(path)
