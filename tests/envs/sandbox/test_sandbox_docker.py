"""The docker backend: clear errors when it cannot run, one container per execution, cleanup."""

import contextlib
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from types import SimpleNamespace

import pytest

from envs.sandbox import ExecResult, Limits, SandboxConfig, SandboxUnavailable, make_sandbox
from envs.sandbox.docker_backend import check_image, docker_client
from sandbox_timing import wait_until


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
    label = f"lopd.sandbox.owner={sb.owner}"

    def left() -> list:  # ignore_removed: a container auto-removed between listing and inspecting
        return sb.client.containers.list(all=True, filters={"label": label}, ignore_removed=True)

    wait_until(lambda: not left(), 10, every=0.2)
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

    def containers(self, all=False, filters=None):
        return []


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
            wait_until(lambda: sb._pool.qsize() >= cfg.docker_pool_size, 10, every=0.01)
            job()
    finally:
        v.close()
    assert len(keys) == 2 and set(keys) == {sb._pool_key(sb.config.limits)}
    # every container came warm from the pool's filler, and holds what a grading run needs
    assert fake_docker.created and all(t == "lopd-docker-pool" for t, _ in fake_docker.created)
    assert {hc["mem_limit"] for _, hc in fake_docker.created} == {"16384m"}


def test_unclosed_sandbox_is_collected(fake_docker):
    """The pool filler holds the sandbox only weakly: dropped unclosed, it is collected and cleaned up."""
    from envs.sandbox.docker_backend import DockerSandbox

    sb = DockerSandbox(SandboxConfig(backend="docker", docker_pool_size=2))
    ref, filler = weakref.ref(sb), sb._filler
    pool = sb._pool  # not sb itself: the wait must not keep it alive
    wait_until(lambda: pool.qsize() >= 2, 10, every=0.01)
    del sb
    wait_until(lambda: gc.collect() is not None and ref() is None and not filler.is_alive(), 10)
    assert ref() is None and not filler.is_alive()


def test_reap_removes_only_dead_owners_containers():
    from envs.sandbox.docker_backend import _pid_ns, _proc_start, reap_stale_containers

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host, me, start, ns = socket.gethostname(), os.getpid(), _proc_start(os.getpid()), _pid_ns()

    def labels(owner, start="", pidns=ns):
        return {"lopd.sandbox": "1", "lopd.sandbox.owner": owner, "lopd.sandbox.owner_start": start,
                "lopd.sandbox.owner_pidns": pidns}

    listed = {
        "live": labels(f"{host}:{me}:aaaa", start),
        "live-unrecorded-start": labels(f"{host}:{me}:aaab"),
        "dead": labels(f"{host}:{dead.pid}:bbbb"),
        "reused-pid": labels(f"{host}:{me}:cccc", str(int(start) - 1)),
        "other-host": labels(f"not-{host}:{dead.pid}:dddd"),
        "other-pidns": labels(f"{host}:{dead.pid}:eeee", pidns="pid:[1]"),
        "no-owner": {"lopd.sandbox": "1"},
    }
    removed: list[str] = []
    api = SimpleNamespace(
        containers=lambda all, filters: [{"Id": k, "Labels": v} for k, v in listed.items()],
        remove_container=lambda cid, force: removed.append(cid),
    )
    assert reap_stale_containers(SimpleNamespace(api=api)) == 2
    assert sorted(removed) == ["dead", "reused-pid"]


# ---- container lifecycle with a real daemon: exit, crash, an env never closed -----------------------
_ROOT = Path(__file__).resolve().parents[3]
_OWNED = "len(sb.client.api.containers(all=True, filters={'label': 'lopd.sandbox.owner=' + sb.owner}))"
_CHILD = f"""
import os, signal, sys, time
from envs.sandbox import SandboxConfig, make_sandbox
sb = make_sandbox(SandboxConfig(backend="docker", docker_pool_size=2))
r = sb.run("print(6 * 7)")
assert r.ok and r.stdout == b"42\\n", r
deadline = time.monotonic() + 60
while sb._pool.qsize() < 2 and time.monotonic() < deadline:  # warm containers exist when it ends
    time.sleep(0.1)
print(sb.owner, {_OWNED}, flush=True)
if sys.argv[1] == "os._exit":
    os._exit(0)
if sys.argv[1] == "SIGKILL":
    os.kill(os.getpid(), signal.SIGKILL)
"""
_ENV_CHILD = f"""
import gymnasium as gym
import envs
env = gym.make("lopd/evalplus-humaneval-v0", sandbox={{"backend": "docker"}})
env.reset(options={{"task_id": "HumanEval/53"}})
_, reward, *_ = env.step("```python\\ndef add(x: int, y: int):\\n    return x + y\\n```")
sb = env.unwrapped.verifier.sandbox
print(reward, sb.owner, {_OWNED}, flush=True)
del env, sb
"""


@pytest.fixture(scope="module")
def client():
    from envs.sandbox.docker_backend import docker_unavailable_reason

    if reason := docker_unavailable_reason():
        pytest.skip(f"docker sandbox unavailable: {reason}")
    return docker_client()


def _owned(client, prefix: str) -> list[str]:
    """Ids of the sandbox containers whose owner label starts with ``prefix`` (an owner, or host:pid:)."""
    found = client.api.containers(all=True, filters={"label": "lopd.sandbox=1"})
    return [c["Id"] for c in found if (c["Labels"] or {}).get("lopd.sandbox.owner", "").startswith(prefix)]


def _left(client, owner: str, timeout: float = 15) -> list[str]:
    """The owner's containers once none are left, or after ``timeout`` (removals still in flight)."""
    wait_until(lambda: not _owned(client, owner), timeout, every=0.2)
    return _owned(client, owner)


@contextlib.contextmanager
def _child(client, code: str, *args: str, timeout: float = 240):
    """Run ``code`` in a child Python at the repo root; yield (its CompletedProcess, its printed words).
    Whatever containers the child left are removed afterwards, even when the test failed."""
    proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=_ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the child took over {timeout}s: {err[-3000:]}")
        done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        words = (out.strip().splitlines() or [''])[-1].split()  # the child's last line
        assert len(words) >= 2 and words[-2].startswith(f"{socket.gethostname()}:{proc.pid}:"), err[-3000:]
        yield done, words
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for cid in _owned(client, f"{socket.gethostname()}:{proc.pid}:"):
            with contextlib.suppress(Exception):
                client.api.remove_container(cid, force=True)


@pytest.mark.docker
@pytest.mark.slow
def test_unclosed_sandbox_leaves_no_container_at_exit(client):
    with _child(client, _CHILD, "exit") as (done, (owner, before)):
        assert done.returncode == 0, done.stderr[-3000:]
        assert int(before) >= 2
        assert _left(client, owner) == []


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("how", ["os._exit", "SIGKILL"])
def test_containers_of_a_crashed_owner_are_reaped(client, docker_sandbox, how):
    from envs.sandbox.docker_backend import reap_stale_containers

    wait_until(lambda: docker_sandbox._pool.qsize() >= 2, 60, every=0.1)
    live = {slot.cid for slot in list(docker_sandbox._pool.queue)}  # a live owner's warm containers
    with _child(client, _CHILD, how) as (done, (owner, before)):
        assert done.returncode == (0 if how == "os._exit" else -signal.SIGKILL), done.stderr[-3000:]
        assert int(before) >= 2 and len(_owned(client, owner)) >= 2  # nobody removed them
        if how == "os._exit":
            # under pytest -n 2 a sandbox starting on the other worker may reap some of them first, so
            # what is checked is that none is left, not how many this call removed
            reap_stale_containers(client)
        else:  # a new sandbox reaps when it starts
            make_sandbox(SandboxConfig(backend="docker", docker_pool_size=0)).close()
        # a removal the other worker's reap began is still in flight (ours got 409): wait it out
        assert _left(client, owner) == []
        assert live and live <= set(_owned(client, docker_sandbox.owner))
        assert docker_sandbox.run("print(1)").ok


@pytest.mark.docker
@pytest.mark.slow
def test_env_never_closed_leaves_no_container(client):
    from envs.data import has_data

    if not has_data("evalplus"):
        pytest.skip("EvalPlus data not found; set LOPD_DATA_DIR")
    with _child(client, _ENV_CHILD) as (done, (reward, owner, before)):
        assert done.returncode == 0, done.stderr[-3000:]
        assert float(reward) == 1.0 and int(before) >= 1
        assert _left(client, owner) == []
