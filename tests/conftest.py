"""Shared test settings: deterministic hypothesis profile, offline model hubs, a private cache, the
one_thread fixture."""
import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

settings.register_profile("ci", derandomize=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile("ci")

# The worlds, bases and evaluator caches the tests build go to a folder of this run, not the user's
# ~/.cache/lopd (set LOPD_CACHE_DIR to keep one across runs).
_PRIVATE_CACHE = None if os.environ.get("LOPD_CACHE_DIR") else tempfile.mkdtemp(prefix="lopd-test-cache-")
if _PRIVATE_CACHE:
    os.environ["LOPD_CACHE_DIR"] = _PRIVATE_CACHE


def pytest_unconfigure(config):
    if _PRIVATE_CACHE:
        shutil.rmtree(_PRIVATE_CACHE, ignore_errors=True)


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


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory):
    """(ServerPool, base dir) of one real vLLM server on the pinned base for the session (skips, saying
    why, when `make vllm` did not build .venv-vllm)."""
    from vllm_server import launch_server, require_vllm

    require_vllm()
    pool, base = launch_server(tmp_path_factory.mktemp("vllm"))
    yield pool, base
    pool.close()


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the node ids
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``make test``: ``-n 2 --dist loadgroup``), every test of the one real vLLM server
    runs on one worker, so the session starts one server, not one a worker; and the torchrun tests, which
    start two processes each, run one at a time."""
    for item in items:
        if "vllm_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("vllm"))
        elif item.path.name == "test_distributed.py":
            item.add_marker(pytest.mark.xdist_group("torchrun"))


def pytest_collection_finish(session):
    """A grouped test whose node id lacks its ``@group`` suffix means xdist is not grouping (a pytest it does
    not support): every worker would start its own vLLM server. Fail loudly instead."""
    if os.environ.get("PYTEST_XDIST_WORKER") and session.config.getoption("loadgroup", False):
        lost = [i.nodeid for i in session.items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid]
        if lost:
            raise pytest.UsageError(f"pytest-xdist did not group {len(lost)} tests (e.g. {lost[0]}): "
                                    f"pytest {pytest.__version__} is not supported by this pytest-xdist")


@pytest.fixture
def built_base(tmp_path):
    """A factory of base-model folders as the base cache writes them: ``built_base("1m-aaa", "k1")`` is
    ``tmp_path/1m-aaa`` holding a ``base_info.json`` with recorded key ``k1`` (None: an empty folder, not a
    built base). Two folders with one recorded key are the same weights under different cache names."""
    import json

    def make(name: str, key: str | None):
        folder = tmp_path / name
        folder.mkdir()
        if key is not None:
            (folder / "base_info.json").write_text(json.dumps({"key": key}))
        return folder

    return make
