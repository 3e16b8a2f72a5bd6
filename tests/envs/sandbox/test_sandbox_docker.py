"""The docker backend: clear errors when it cannot run, one container per execution, cleanup."""

import time

import pytest

from envs.sandbox import Limits, SandboxConfig, SandboxUnavailable, make_sandbox
from envs.sandbox.docker_backend import check_image, docker_client


def test_missing_daemon_names_the_fix(tmp_path):
    cfg = SandboxConfig(backend="docker", docker_base_url=f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(SandboxUnavailable) as e:
        make_sandbox(cfg)
    assert "dockerd" in str(e.value) and "apt-get install docker.io" in str(e.value)


@pytest.mark.docker
def test_missing_image_names_the_fix():
    try:
        client = docker_client()
    except SandboxUnavailable as e:
        pytest.skip(f"docker daemon unavailable: {e}")
    with pytest.raises(SandboxUnavailable, match="make sandbox-image"):
        check_image(client, "lopd-sandbox-does-not-exist:0")


@pytest.mark.docker
@pytest.mark.slow
def test_each_execution_gets_a_fresh_container(docker_sandbox):
    r1 = docker_sandbox.run("import os\nopen('/tmp/mark', 'w').write('1')\nprint(os.uname().nodename)")
    r2 = docker_sandbox.run("import os\nprint(os.path.exists('/tmp/mark'), os.uname().nodename)")
    assert r1.ok and r2.ok
    exists, host2 = r2.stdout.decode().split()
    assert exists == "False" and host2 != r1.stdout.decode().strip()


@pytest.mark.docker
@pytest.mark.slow
def test_container_is_confined(docker_sandbox):
    r = docker_sandbox.run(
        "import os\nprint(os.getuid(), os.getcwd())\n"
        "try:\n    open('/usr/x', 'w')\nexcept OSError as e:\n    print('ro', e.errno)\n"
    )
    assert r.stdout.decode().splitlines() == ["65534 /tmp/work", "ro 30"]  # EROFS: read-only root


@pytest.mark.docker
@pytest.mark.slow
def test_cold_start_without_pool_and_cleanup():
    from envs.sandbox.docker_backend import docker_unavailable_reason

    if reason := docker_unavailable_reason():
        pytest.skip(f"docker sandbox unavailable: {reason}")
    sb = make_sandbox(SandboxConfig(backend="docker", docker_pool_size=0))
    try:
        r = sb.run("print(input())", stdin=b"hi\n", limits=Limits(timeout_s=30))
        assert r.ok and r.stdout == b"hi\n" and r.isolation == "docker"
    finally:
        sb.close()
    deadline = time.monotonic() + 10
    label = f"lopd.sandbox.owner={sb.owner}"
    def left() -> list:  # ignore_removed: a container auto-removed between listing and inspecting
        return sb.client.containers.list(all=True, filters={"label": label}, ignore_removed=True)

    while left() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left() == []


@pytest.mark.docker
@pytest.mark.slow
def test_contract_matches_the_local_backend(docker_sandbox):
    import signal

    r = docker_sandbox.run(
        "import sys\nprint(input()[::-1]); print(open('d/x').read()); sys.exit(3)",
        stdin=b"abc\n",
        files={"d/x": "hi"},
    )
    assert (r.exit_code, r.stdout) == (3, b"cba\nhi\n")
    r = docker_sandbox.run("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    assert r.exit_code is None and r.signal == signal.SIGSEGV
    r = docker_sandbox.run("while True: pass", limits=Limits(timeout_s=1))
    assert r.timed_out
