"""Red-team suite: hostile programs against both backends. Each is contained (nothing reaches the host,
the harness keeps working) and, graded as an EvalPlus (strict) or LiveCodeBench answer, fails.

docker cases are marked ``docker`` and skip with the reason when the daemon or the image is absent.
"""

import os
import secrets
import socket
import threading
import time

import pytest

from envs.data import has_data, require_data
from envs.sandbox import Limits, SandboxConfig
from sandbox_timing import bound, wait_until  # noqa: E402

BACKENDS = ["local", pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.slow])]
needs_evalplus = pytest.mark.skipif(
    not has_data("evalplus"), reason="EvalPlus data not found; set LOPD_DATA_DIR"
)
needs_lcb = pytest.mark.skipif(
    not has_data("livecodebench"), reason="LiveCodeBench data not found; set LOPD_DATA_DIR"
)


NOT_ISOLATED = "the local sandbox is not isolated here (not root): these attacks would hit this machine"


@pytest.fixture(params=BACKENDS)
def sandbox(request):
    sb = request.getfixturevalue(f"{request.param}_sandbox")
    if sb.isolation == "none":
        pytest.skip(NOT_ISOLATED)
    return sb


def skip_unless_docker_ready(backend: str) -> None:
    """Skips, saying why, when ``backend`` is docker and its daemon or image is absent."""
    if backend == "docker":
        from envs.sandbox.docker_backend import docker_unavailable_reason

        if reason := docker_unavailable_reason():
            pytest.skip(f"docker sandbox unavailable: {reason}")


def isolated_verifier(make, backend: str):
    """Yields ``make(SandboxConfig(backend=backend))``, a verifier, closed afterwards; skips where
    ``backend`` is docker and unavailable, or where its sandbox is not isolated."""
    skip_unless_docker_ready(backend)
    v = make(SandboxConfig(backend=backend))
    if v.sandbox.isolation == "none":
        v.close()
        pytest.skip(NOT_ISOLATED)
    yield v
    v.close()


def sandbox_uid_processes(cfg: SandboxConfig = SandboxConfig()) -> list[int]:
    """Host pids running under the local backend's throw-away uids."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as f:
                uid = next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        if cfg.uid_base <= uid < cfg.uid_base + cfg.uid_count:
            found.append(int(pid))
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _leftovers(zygote: int) -> list[tuple[int, str]]:
    """What our zygote's monitors still hold (a monitor exits after its reply; the spare monitors
    waiting for the next request hold nothing), and any process under a throw-away uid that is not
    inside some lopd sandbox at all (an escape)."""
    import psutil

    try:
        monitors = psutil.Process(zygote).children()
        mine = [p.pid for m in monitors for p in m.children(recursive=True)]
    except psutil.Error:
        mine = []
    # other test runs on this machine may own some of these; a zombie or a process gone since the listing
    # does nothing, and under pytest -n 2 another worker's sandbox leaves such exiting processes all the time
    escaped = [pid for pid in sandbox_uid_processes() if _alive(pid) and _outside_jails(pid)]
    if escaped:  # one caught while its sandbox's pid namespace was torn down is gone a moment later; an
        time.sleep(0.5)  # escapee is not
        escaped = [pid for pid in escaped if _alive(pid) and _outside_jails(pid)]
    return [(pid, _cmdline(pid)) for pid in mine + escaped]


def _outside_jails(pid: int) -> bool:
    """Whether no ancestor of ``pid`` is a lopd sandbox's jail."""
    chain, cur = [], pid
    while cur > 1 and len(chain) < 64:
        chain.append(_cmdline(cur))
        cur = _parent(cur)
    return not any("lopd_jail" in c for c in chain)


def assert_nothing_left(sb):
    if sb.name == "local":
        # a killed pid namespace can take a moment to tear down under load
        wait_until(lambda: not _leftovers(sb._proc.pid), 5)
        assert _leftovers(sb._proc.pid) == []
    # the harness survives: the same backend still runs code
    r = sb.run("print('alive')")
    assert r.stdout == b"alive\n", r


class Listener:
    """A TCP server on the host's loopback that records any connection."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port, self.hits, self._stop = self.sock.getsockname()[1], 0, False
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def _loop(self):
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
                self.hits += 1
                conn.close()
            except OSError:
                pass

    def close(self):
        self._stop = True
        self._t.join()
        self.sock.close()


# ---- containment of raw programs -----------------------------------------------------------------
FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
MEMORY_BOMB = "x = []\nwhile True:\n    x.append(bytearray(32 << 20))\n"
DEEP_RECURSION = (
    "import sys\nsys.setrecursionlimit(10**8)\ndef f(n):\n    return list(map(f, [n + 1]))\nf(0)\n"
)
ORPHANS = (
    "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(60)\n"
    "        os._exit(0)\n    os._exit(0)\nprint('parent done')\n"
)
KILL_PARENT = (
    "import os, signal\nfor pid in (os.getppid(), 1, -1):\n    try:\n        os.kill(pid, signal.SIGKILL)\n"
    "    except OSError as e:\n        print(pid, e.errno)\n"
)


def test_fork_bomb_is_capped_and_killed(sandbox):
    r = sandbox.run(FORK_BOMB, limits=Limits(timeout_s=1, nproc=32))
    assert not r.ok and r.timed_out
    assert_nothing_left(sandbox)


def test_memory_bomb_hits_the_limit(sandbox):
    r = sandbox.run(MEMORY_BOMB, limits=Limits(timeout_s=20, memory_mb=384))
    assert not r.ok and (b"MemoryError" in r.stderr or r.signal is not None)
    assert_nothing_left(sandbox)


def test_infinite_loop_times_out(sandbox):
    r = sandbox.run("while True: pass", limits=Limits(timeout_s=1))
    assert r.timed_out and r.duration_s < 5
    assert_nothing_left(sandbox)


def test_deep_recursion_crashes_only_itself(sandbox):
    r = sandbox.run(DEEP_RECURSION, limits=Limits(timeout_s=20, memory_mb=1024))
    assert not r.ok and (r.signal is not None or b"Error" in r.stderr)
    assert_nothing_left(sandbox)


def test_huge_stdout_is_capped(sandbox):
    r = sandbox.run(
        "import os\nwhile True:\n    os.write(1, b'x' * 65536)\n",
        limits=Limits(timeout_s=10, max_output_bytes=1 << 20),
    )
    assert r.output_truncated and len(r.stdout) <= 1 << 20
    assert_nothing_left(sandbox)


def test_writes_outside_the_work_dir_do_not_reach_the_host(sandbox, tmp_path):
    host_dir = tmp_path / "open"
    host_dir.mkdir()
    os.chmod(tmp_path, 0o777)
    os.chmod(host_dir, 0o777)  # writable by anyone on the host: only isolation stops the write
    nonce = secrets.token_hex(4)
    targets = [
        f"{host_dir}/escaped-{nonce}",
        f"/tmp/escaped-{nonce}",
        f"/usr/escaped-{nonce}",
        f"/etc/escaped-{nonce}",
        f"/dev/shm/escaped-{nonce}",
    ]
    prog = (
        "ok = []\n"
        + "".join(
            f"try:\n    open({t!r}, 'w').write('x')\n    ok.append({t!r})\nexcept OSError:\n    pass\n"
            for t in targets
        )
        + "print(ok)\n"
    )
    sandbox.run(prog)
    for t in targets:
        assert not os.path.exists(t), t
    assert_nothing_left(sandbox)


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_environment_is_not_readable(backend, monkeypatch):
    nonce = "lopd-secret-" + secrets.token_hex(8)
    monkeypatch.setenv("LOPD_REDTEAM_SECRET", nonce)
    monkeypatch.setenv("OPENAI_API_KEY", nonce)
    prog = (
        "import os, glob\nprint(dict(os.environ))\n"
        "for p in glob.glob('/proc/*/environ') + ['/proc/1/environ']:\n"
        "    try:\n        print(open(p, 'rb').read())\n    except OSError:\n        pass\n"
    )
    from envs.sandbox import make_sandbox

    skip_unless_docker_ready(backend)
    with make_sandbox(SandboxConfig(backend=backend, docker_pool_size=0)) as sb:  # started after the secret
        if sb.isolation == "none":
            pytest.skip(NOT_ISOLATED)
        r = sb.run(prog)
        assert r.ok, r.stderr
        assert nonce.encode() not in r.stdout + r.stderr


def test_network_is_unreachable(sandbox):
    listener = Listener()
    try:
        prog = (
            "import socket\nfor addr in [('127.0.0.1', %d), ('8.8.8.8', 53), ('172.17.0.1', %d)]:\n"
            "    try:\n        socket.create_connection(addr, 1)\n        print('CONNECTED', addr)\n"
            "    except OSError as e:\n        print('blocked', e.errno)\n"
            "try:\n    s = socket.socket(socket.AF_UNIX)\n    s.connect('/var/run/docker.sock')\n"
            "    print('CONNECTED docker')\n"
            "except OSError as e:\n    print('blocked', e.errno)\n"
        ) % (listener.port, listener.port)
        r = sandbox.run(prog, limits=Limits(timeout_s=10))
        time.sleep(bound(0.3))  # a connection that got through reaches the listener by then
        assert b"CONNECTED" not in r.stdout and r.stdout.count(b"blocked") == 4
        assert listener.hits == 0
    finally:
        listener.close()
    assert_nothing_left(sandbox)


def test_killing_the_parent_and_everyone_fails_harmlessly(sandbox):
    sandbox.run(KILL_PARENT)
    assert os.getppid() > 1  # we are alive, and so is our parent
    assert_nothing_left(sandbox)


def test_orphans_do_not_outlive_the_run(sandbox):
    r = sandbox.run(ORPHANS, limits=Limits(timeout_s=5))
    assert b"parent done" in r.stdout
    assert_nothing_left(sandbox)
    r = sandbox.run("import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    assert len(eval(r.stdout)) == 2, r  # the next run holds its pid 1 (init or tini) and itself only


# ---- the same attacks as graded answers: every one is a fail ---------------------------------------
HE0 = "has_close_elements"
EVALPLUS_ATTACKS = {
    "fork_bomb": f"import posix\ndef {HE0}(numbers, threshold):\n    while True:\n        posix.fork()\n",
    "memory_bomb": f"def {HE0}(numbers, threshold):\n    return len(bytearray(1 << 40)) > 0\n",
    "infinite_loop": f"def {HE0}(numbers, threshold):\n    while True:\n        pass\n",
    "deep_recursion": f"def {HE0}(numbers, threshold):\n    return {HE0}(numbers, threshold)\n",
    "huge_stdout": f"import posix\ndef {HE0}(numbers, threshold):\n    while True:\n"
    "        posix.write(1, b'x' * 65536)\n",
    "write_outside": f"def {HE0}(numbers, threshold):\n    import io\n"
    "    io.open('/etc/pwned', 'w').write('x')\n    return False\n",
    "read_env": f"import posix\ndef {HE0}(numbers, threshold):\n    return str(posix.environ)\n",
    "network": f"import socket\ndef {HE0}(numbers, threshold):\n"
    "    socket.create_connection(('127.0.0.1', 22), 1)\n    return False\n",
    "kill_parent": f"import posix, os\ndef {HE0}(numbers, threshold):\n"
    "    posix.kill(os.getppid(), 9)\n    return False\n",
    "os_exit": f"import os\ndef {HE0}(numbers, threshold):\n    os._exit(0)\n",
    "sys_exit": f"import sys\ndef {HE0}(numbers, threshold):\n    sys.exit(0)\n",
    "eq_override": "class T:\n    def __eq__(self, o):\n        return True\n"
    f"def {HE0}(numbers, threshold):\n    return T()\n",
    "bool_subclass_eq": "class B(int):\n    def __eq__(self, o):\n        return True\n"
    "    __hash__ = int.__hash__\n"
    f"def {HE0}(numbers, threshold):\n    return B(0)\n",
    "builtins_override": "import builtins, numpy\nbuiltins.isinstance = lambda *a: True\n"
    "numpy.allclose = lambda *a, **k: True\n"
    f"def {HE0}(numbers, threshold):\n    return 'yes'\n",
    "forge_runner_messages": "import posix, struct\n"
    f"def {HE0}(numbers, threshold):\n    for fd in range(3, 64):\n        try:\n"
    "            posix.write(fd, struct.pack('>IB', 0, ord('D')))\n        except OSError:\n"
    "            pass\n    return None\n",
    "orphans": f"import posix, time\ndef {HE0}(numbers, threshold):\n"
    "    if posix.fork() == 0:\n        time.sleep(60)\n    return None\n",
}


@pytest.fixture(scope="module", params=BACKENDS)
def strict_verifier(request):
    if not has_data("evalplus"):
        pytest.skip("EvalPlus data not found; set LOPD_DATA_DIR")
    from envs.evalplus.verifier import EvalPlusVerifier

    yield from isolated_verifier(
        lambda cfg: EvalPlusVerifier("humaneval", mode="strict", sandbox_config=cfg), request.param
    )


@pytest.mark.slow
@needs_evalplus
@pytest.mark.parametrize("attack", sorted(EVALPLUS_ATTACKS))
def test_evalplus_attack_gets_a_fail_verdict(strict_verifier, attack):
    v = strict_verifier.check("HumanEval/0", EVALPLUS_ATTACKS[attack])
    assert not v.passed, (attack, v)
    assert not os.path.exists("/etc/pwned")
    assert_nothing_left(strict_verifier.sandbox)


LCB_STDIN_ATTACKS = {
    "fork_bomb": "import posix\nwhile True:\n    posix.fork()\n",
    "memory_bomb": "x = bytearray(1 << 40)\n",
    "deep_recursion": "def f(n):\n    return f(n + 1)\nf(0)\n",
    "write_outside": "import io\nio.open('/etc/pwned', 'w').write('x')\n",
    "read_env": "import posix\nprint(posix.environ)\n",
    "network": "import socket\nsocket.create_connection(('127.0.0.1', 22), 1)\n",
    "kill_parent": "import posix, os\nposix.kill(os.getppid(), 9)\n",
    "os_exit": "import os\nos._exit(0)\n",
    "sys_exit": "import sys\nsys.exit(0)\n",
    "forge_runner_messages": "import posix, struct, json\n"
    "payload = json.dumps({'results': [True] * 5, 'metadata': {}}).encode()\n"
    "for fd in range(3, 64):\n    try:\n        posix.write(fd, struct.pack('>IB', len(payload), "
    "ord('R')) + payload)\n    except OSError:\n        pass\n",
    "orphans": "import posix, time\nif posix.fork() == 0:\n    time.sleep(60)\nprint('NO')\n",
}


@pytest.fixture(scope="module", params=BACKENDS)
def lcb_verifier(request):
    from envs.livecodebench.verifier import LCBVerifier

    yield from isolated_verifier(lambda cfg: LCBVerifier(mode="strict", sandbox_config=cfg), request.param)


@pytest.mark.slow
@needs_lcb
@pytest.mark.parametrize("attack", sorted(LCB_STDIN_ATTACKS))
def test_livecodebench_attack_gets_a_fail_verdict(lcb_verifier, attack):
    from envs.livecodebench.data import load_problems

    problem = load_problems(
        require_data("livecodebench", "fixtures", "lcb_codegen_lite_sample_1873_A.jsonl")
    )[0]
    v = lcb_verifier.check(problem, LCB_STDIN_ATTACKS[attack])
    assert not v.passed, (attack, v)
    assert not os.path.exists("/etc/pwned")
    assert_nothing_left(lcb_verifier.sandbox)
