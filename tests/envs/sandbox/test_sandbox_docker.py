"""The docker backend: clear errors when it cannot run, one container per execution, cleanup."""

import json
import threading
import time
from types import SimpleNamespace

import pytest

from envs.sandbox import ExecResult, Limits, SandboxConfig, SandboxUnavailable, make_sandbox
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


# ---- the warm pool, without a daemon ----------------------------------------------------------------
class _FakeDockerAPI:
    """Just enough of docker's low-level API for the pool: containers are ids, nothing runs."""

    def __init__(self):
        self.created: list[tuple[str, dict]] = []  # (creating thread, host config)
        self._lock = threading.Lock()

    def create_host_config(self, **kw):
        return kw

    def create_container(self, image, **kw):
        with self._lock:
            self.created.append((threading.current_thread().name, kw["host_config"]))
            return {"Id": f"fake-{len(self.created)}"}

    def attach_socket(self, cid, params):
        return SimpleNamespace(close=lambda: None)

    def start(self, cid):
        pass

    def remove_container(self, cid, force=False):
        pass


@pytest.fixture
def fake_docker(monkeypatch):
    from envs.sandbox import docker_backend

    api = _FakeDockerAPI()
    client = SimpleNamespace(api=api, containers=SimpleNamespace(list=lambda **kw: []))
    monkeypatch.setattr(docker_backend, "docker_client", lambda base_url=None: client)
    monkeypatch.setattr(docker_backend, "check_image", lambda client, image: None)
    return api


def _lcb_jobs(verifier):
    from envs.livecodebench.data import parse_row

    def problem(qid, tests, meta):
        return parse_row(
            {
                "question_id": qid,
                "question_content": "q",
                "contest_date": "2024-01-15T00:00:00",
                "public_test_cases": json.dumps(tests),
                "metadata": json.dumps(meta),
            }
        )

    one = problem("p1", [{"input": "1\n", "output": "1\n", "testtype": "stdin"}], {})
    two = problem("p2", [{"input": "1", "output": "2", "testtype": "functional"}] * 3, {"func_name": "f"})
    return [
        lambda: verifier.check(one, "print(input())"),
        lambda: verifier.check(two, "class Solution: pass"),
    ]


@pytest.mark.parametrize("grader", ["evalplus", "livecodebench"])
def test_grader_runs_use_warm_containers(fake_docker, grader):
    cfg = SandboxConfig(backend="docker", docker_pool_size=2)
    if grader == "evalplus":
        from envs.data import has_data

        if not has_data("evalplus"):
            pytest.skip("EvalPlus data not found; set LOPD_DATA_DIR")
        from envs.evalplus.verifier import EvalPlusVerifier

        v = EvalPlusVerifier("humaneval", mode="strict", sandbox_config=cfg)
        jobs = [lambda t=t: v.check(t, "def f():\n    pass\n") for t in ("HumanEval/0", "HumanEval/2")]
    else:
        from envs.livecodebench.verifier import LCBVerifier

        v = LCBVerifier(mode="strict", sandbox_config=cfg)
        jobs = _lcb_jobs(v)
    sb, keys = v.sandbox, []
    acquire = sb._acquire
    sb._acquire = lambda limits: keys.append(sb._pool_key(limits)) or acquire(limits)
    sb._talk = lambda *a: ExecResult(None, backend="docker", error="not run: fake daemon")
    try:
        for job in jobs:  # different time limits per task: the pool must serve them all
            deadline = time.monotonic() + 10
            while sb._pool.qsize() < cfg.docker_pool_size and time.monotonic() < deadline:
                time.sleep(0.01)
            job()
    finally:
        v.close()
    assert len(keys) == 2 and set(keys) == {sb._pool_key(sb.config.limits)}
    # every container came warm from the pool's filler, and holds what a grading run needs
    assert fake_docker.created and all(t == "lopd-docker-pool" for t, _ in fake_docker.created)
    assert {hc["mem_limit"] for _, hc in fake_docker.created} == {"16384m"}
