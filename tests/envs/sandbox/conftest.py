"""Sandboxes for the tests: the local one always, the docker one when its daemon and image exist."""

import os

import pytest

from envs.sandbox import SandboxConfig, make_sandbox


@pytest.fixture(scope="module")
def local_sandbox():
    sb = make_sandbox(SandboxConfig(backend="local"))
    yield sb
    sb.close()


@pytest.fixture(scope="module")
def docker_sandbox():
    from envs.sandbox.docker_backend import docker_unavailable_reason

    reason = docker_unavailable_reason()
    if reason:
        pytest.skip(f"docker sandbox unavailable: {reason}")
    sb = make_sandbox(SandboxConfig(backend="docker", docker_pool_size=2))
    yield sb
    sb.close()


def full_isolation_possible() -> bool:
    return os.geteuid() == 0
