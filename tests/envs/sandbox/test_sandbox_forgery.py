"""Forged verdicts: each attack a red team found, submitted through ``env.step`` as the model's answer on
every backend it applies to (docs/SANDBOX.md, "Who can speak for the verdict"), plus the defense it
meets, checked directly in the sandbox.

Most answers are *gated*: they solve the task only if the attack worked, so reward 0 proves it failed.
EvalPlus answers keep their attack inside the entry point: the env's ``evalplus.sanitize`` drops
module-level statements.
"""

import json
import os
import platform
import secrets
import struct
import sys
import threading
from pathlib import Path

import gymnasium as gym
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "livecodebench"))
from lcb_records import SUM_OK, SUM_ROW  # noqa: E402

import envs  # noqa: E402, F401
from envs.data import has_data  # noqa: E402
from envs.sandbox import Limits  # noqa: E402
from envs.sandbox.base import compose_program  # noqa: E402
from envs.sandbox.guest import open_result  # noqa: E402

BACKENDS = ["local", pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.slow])]
GUEST = Path(envs.__path__[0]) / "sandbox" / "guest.py"
x86_64 = pytest.mark.skipif(platform.machine() != "x86_64", reason="keyring syscall numbers are x86_64's")


def _backend_or_skip(request, backend):
    sb = request.getfixturevalue(f"{backend}_sandbox")
    if sb.isolation == "none":
        pytest.skip("the local sandbox is not isolated here (not root)")
    return sb


@pytest.fixture(scope="module", params=BACKENDS)
def humaneval(request):
    if not has_data("evalplus"):
        pytest.skip("EvalPlus data not found; set LOPD_DATA_DIR")
    _backend_or_skip(request, request.param)
    env = gym.make("lopd/evalplus-humaneval-v0", sandbox={"backend": request.param})
    yield env
    env.close()


@pytest.fixture(scope="module", params=BACKENDS)
def lcb(request, tmp_path_factory):
    _backend_or_skip(request, request.param)
    path = tmp_path_factory.mktemp("lcb") / "own.jsonl"
    path.write_text(json.dumps(SUM_ROW) + "\n")
    env = gym.make("lopd/livecodebench-v0", source=str(path), sandbox={"backend": request.param})
    yield env
    env.close()


def step(env, task_id, code):
    env.reset(options={"task_id": task_id})
    _, reward, terminated, _, info = env.step(f"```python\n{code}\n```")
    assert terminated
    return reward, info["verdict"]


def in_add(attack: str, result: str = "x + y if WORKED else x * y + 1") -> str:
    """HumanEval/53 (``add``) running ``attack`` (code that may set WORKED) at each call."""
    body = "\n".join("    " + line for line in attack.strip("\n").splitlines())
    return f"def add(x, y):\n    WORKED = False\n{body}\n    return {result}\n"


# ---- 1. nothing the candidate runs can write the result channel ------------------------------------
FORGE = r"""
import os, posix, signal
LINES = [b'{"base": ["pass", []], "plus": ["pass", []]}\n',
         b'{"results": [' + b'true, ' * 49 + b'true], "metadata": {}}\n']
for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        fds = ["0", "1", "2", "3", "4", "5"]
    for fd in fds:
        try:
            f = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
            for line in LINES:
                os.write(f, line)
            os.close(f)
        except OSError:
            pass
    try:
        with open(f"/proc/{pid}/mem", "r+b"):
            pass
    except OSError:
        pass
for pid in (os.getppid(), 1):
    try:
        posix.kill(pid, signal.SIGSTOP)  # lcb's guard sets os.kill to None
    except OSError:
        pass
"""


def test_forged_result_lines_do_not_pass_evalplus(humaneval):
    reward, verdict = step(humaneval, "HumanEval/53", in_add(FORGE, "x * y + 1"))
    assert reward == 0.0 and verdict["base_status"] == "fail", verdict


def test_forged_result_lines_do_not_pass_livecodebench(lcb):
    reward, verdict = step(lcb, "own_sum", FORGE + "print(0)\nprint(0)\n")
    assert reward == 0.0 and verdict["results"] == [-2], verdict


PROBE = r"""
import ctypes, json, os, signal, sys
guard_runner()
r, w = os.pipe()
pid = os.fork()  # the child is a candidate from here on
if pid == 0:
    ppid, out = os.getppid(), {}
    own = (f"/proc/{ppid}/fd/{_result_fd}", f"/proc/{ppid}/fd/0", f"/proc/{ppid}/mem")
    for path in own + ("/proc/1/fd/1", "/proc/1/mem"):
        try:
            os.close(os.open(path, os.O_WRONLY))
            out[path] = "opened"
        except OSError as e:
            out[path] = e.errno
    libc = ctypes.CDLL(None, use_errno=True)
    out["ptrace"] = libc.ptrace(16, ppid, 0, 0) == 0 or ctypes.get_errno()  # PTRACE_ATTACH
    for sig in (0, int(signal.SIGSTOP)):
        try:
            os.kill(ppid, sig)
            out[f"kill {sig}"] = "delivered"
        except OSError as e:
            out[f"kill {sig}"] = e.errno
    status = open("/proc/self/status").read()
    out["uid"] = os.getuid()
    out["caps"] = status.split("CapEff:")[1].split()[0]
    os.write(w, json.dumps(out).encode())
    os._exit(0)
os.close(w)
os.waitpid(pid, 0)
child = json.loads(os.read(r, 1 << 16))
writable = [p for p in sys.path if os.access(p or ".", os.W_OK)]
emit_result({"child": child, "uid": os.getuid(), "writable_sys_path": writable})
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_candidate_holds_nothing_that_speaks_for_its_grader(request, backend):
    sb = _backend_or_skip(request, backend)
    key = secrets.token_bytes(32)
    r = sb.run(
        compose_program(GUEST.read_text(), PROBE, call=""),
        stdin=struct.pack(">I", 32) + key,
        grader=True,
        limits=Limits(timeout_s=30),
    )
    res = open_result(key, r.stdout)
    child = res["child"]
    assert child["uid"] != res["uid"] and child["caps"] == "0000000000000000", res
    assert all(v != "opened" for p, v in child.items() if p.startswith("/proc")), child
    assert child["ptrace"] is not True and child["kill 0"] != "delivered", child
    assert child["kill 19"] != "delivered", child
    assert res["writable_sys_path"] == [], res  # 2.: no folder a candidate could plant a module in


def test_a_result_without_the_runs_seal_is_refused():
    with pytest.raises(ValueError, match="seal"):
        open_result(secrets.token_bytes(32), b'{"base": ["pass", []], "plus": ["pass", []]}\n')


# ---- 2. modules planted for the grader's lazy imports --------------------------------------------
PLANT = r"""
import os, sys
FAKES = {
    "decimal": "class Decimal:\n    def __init__(self, v):\n        pass\n"
               "    def __eq__(self, o):\n        return True\n",
    "numpy": "def allclose(*a, **k):\n    return True\n",
    "marshal": "def loads(b):\n    return 1\n",
}
for d in {".", os.environ.get("HOME", "."), os.environ.get("TMPDIR", "."), "/tmp", *sys.path}:
    for name, src in FAKES.items():
        try:
            with open(os.path.join(d or ".", name + ".py"), "w") as f:
                f.write(src)
        except OSError:
            pass
"""


def test_planted_modules_do_not_pass_livecodebench(lcb):
    reward, verdict = step(lcb, "own_sum", PLANT + "n = int(input())\nprint(12345)\nprint(0.5)\n")
    assert reward == 0.0 and verdict["results"] == [-2], verdict


def test_planted_modules_do_not_pass_evalplus(humaneval):
    # HumanEval/2 returns floats: its check calls numpy.allclose
    body = "\n".join("    " + line for line in PLANT.strip().splitlines())
    reward, verdict = step(
        humaneval, "HumanEval/2", f"def truncate_number(number):\n{body}\n    return 0.25\n"
    )
    assert reward == 0.0 and verdict["base_status"] == "fail", verdict


# ---- 3. a candidate that switches off its own timer ---------------------------------------------
TIMER_OFF = (
    "import signal, time\n"
    "signal.setitimer(signal.ITIMER_REAL, 0)\n"
    "signal.alarm(0)\n"
    "signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
)


def test_a_timer_switched_off_still_fails_the_slow_input_evalplus(humaneval):
    # 3 s on the first input only: within the phase's budget, over the input's 1 s limit
    first_call_sleeps = TIMER_OFF + "if not hasattr(add, 'slept'):\n    add.slept = True\n    time.sleep(3)\n"
    reward, verdict = step(humaneval, "HumanEval/53", in_add(first_call_sleeps, "x + y"))
    assert reward == 0.0 and verdict["base_status"] == "fail", verdict


@pytest.mark.slow  # it waits out lcb's 6 s limit
def test_a_timer_switched_off_still_fails_the_slow_test_livecodebench(lcb):
    reward, verdict = step(lcb, "own_sum", TIMER_OFF + "time.sleep(7)\n" + SUM_OK)  # lcb's limit: 6 s
    assert reward == 0.0 and verdict["results"] == [-3], verdict


@pytest.mark.slow  # it waits out lcb's 6 s limit
def test_honest_code_keeps_the_graders_own_time_limit_verdict(lcb):
    reward, verdict = step(lcb, "own_sum", "import time\ntime.sleep(7)\n" + SUM_OK)
    assert reward == 0.0 and verdict["results"] == [-3], verdict


# ---- 4.-8. what one run could leave for, or take from, another run or the machine -----------------
KEYRING = r"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
{action}
"""
ADD_KEY = (  # add_key to the session (@s) and the user (@u) keyring
    "for ring in (-3, -4):\n    libc.syscall(248, b'user', b'lopd-leak', b'secret', 6, ctypes.c_int(ring))"
)
FIND_KEY = "WORKED = libc.syscall(249, b'user', b'lopd-leak', None, ctypes.c_int(0)) > 0"  # request_key


@x86_64
def test_a_key_left_in_the_keyring_does_not_reach_the_next_run(humaneval):
    step(humaneval, "HumanEval/53", in_add(KEYRING.format(action=ADD_KEY)))
    reward, _ = step(humaneval, "HumanEval/53", in_add(KEYRING.format(action=FIND_KEY)))
    assert reward == 0.0


@x86_64
@pytest.mark.parametrize("backend", BACKENDS)
def test_keyrings_are_denied(request, backend):
    sb = _backend_or_skip(request, backend)
    r = sb.run(
        KEYRING.format(
            action="print(libc.syscall(248, b'user', b'k', b'v', 1, ctypes.c_int(-3)), ctypes.get_errno())"
        )
    )
    assert r.stdout.split() == [b"-1", b"1"], r  # EPERM


LISTEN = (
    "import socket, time\ns = socket.socket(socket.AF_UNIX)\n"
    "s.bind('\\0{name}')\ns.listen(1)\ntime.sleep(5)\n"
)
CONNECT = (
    "import socket, time\nok = False\nfor _ in range(30):\n    try:\n"
    "        socket.socket(socket.AF_UNIX).connect('\\0{name}')\n        ok = True\n        break\n"
    "    except OSError:\n        time.sleep(0.1)\n"
)


@pytest.mark.slow  # two overlapping 15 s runs
def test_overlapping_runs_cannot_talk_over_abstract_sockets(lcb):
    """Two answers graded at once in one sandbox (``lopd score``'s check_many): one listens on an
    abstract unix socket, the other answers right only if it can connect to it."""
    name = f"lopd-leak-{secrets.token_hex(4)}"
    right = "".join("    " + line + "\n" for line in SUM_OK.splitlines())
    connect = CONNECT.format(name=name) + "if ok:\n" + right + "else:\n    print(0)\n"
    problem = next(t.data["problem"] for t in lcb.unwrapped.tasks if t.task_id == "own_sum")
    verifier = lcb.unwrapped.verifier
    listening, answered = verifier.check_many(
        [(problem, LISTEN.format(name=name) + SUM_OK), (problem, connect)]
    )
    assert listening.passed and answered.results == [-2], (listening, answered)


@pytest.mark.slow  # a 5 s listener
@pytest.mark.parametrize("backend", BACKENDS)
def test_runs_at_the_same_time_have_their_own_network(request, backend):
    sb = _backend_or_skip(request, backend)
    name = f"lopd-leak-{secrets.token_hex(4)}"
    t = threading.Thread(
        target=sb.run, args=(LISTEN.format(name=name),), kwargs={"limits": Limits(timeout_s=20)}
    )
    t.start()
    r = sb.run(CONNECT.format(name=name) + "print(ok)\n", limits=Limits(timeout_s=20))
    t.join(30)
    assert r.stdout.strip() == b"False", r


FAMILIES = (
    "import socket\nfor fam in (40, socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK, socket.AF_PACKET):\n"
    "    try:\n        socket.socket(fam, socket.SOCK_DGRAM if fam != 40 else socket.SOCK_STREAM).close()\n"
    "        WORKED = True\n    except OSError:\n        pass\n"
)


def test_no_socket_family_but_unix_can_be_created(humaneval):
    """AF_VSOCK (40) reaches this VM's host; nothing is connected, only created."""
    reward, _ = step(humaneval, "HumanEval/53", in_add(FAMILIES))
    assert reward == 0.0


def host_only_mount_points() -> list[str]:
    """Mount points of this machine that a local run has no business seeing (not the jail's own)."""
    jail = {"/", "/proc", "/tmp", "/dev", "/dev/shm", "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64"}
    python = tuple(os.path.realpath(p) for p in (sys.prefix, sys.base_prefix))
    points = {line.split()[4] for line in open("/proc/self/mountinfo")}
    return sorted(p for p in points if p not in jail and not p.startswith(("/dev/", "/usr/") + python))


def test_a_local_run_sees_only_its_own_mounts(request):
    if not has_data("evalplus"):
        pytest.skip("EvalPlus data not found; set LOPD_DATA_DIR")
    _backend_or_skip(request, "local")
    hidden = host_only_mount_points()
    assert hidden, "this machine has no mount of its own to hide"
    attack = (
        f"HOST = {hidden!r}\nseen = [l.split()[4] for l in open('/proc/self/mountinfo')]\n"
        "WORKED = any(p in seen for p in HOST)\n"
    )
    env = gym.make("lopd/evalplus-humaneval-v0", sandbox={"backend": "local"})
    try:
        reward, _ = step(env, "HumanEval/53", in_add(attack))
    finally:
        env.close()
    assert reward == 0.0


def test_the_local_mount_table_is_the_jails_alone(local_sandbox):
    if local_sandbox.isolation == "none":
        pytest.skip("the local sandbox is not isolated here (not root)")
    r = local_sandbox.run("print(open('/proc/self/mountinfo').read())")
    points = {line.split()[4] for line in r.stdout.decode().splitlines() if line.strip()}
    python = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)}
    devices = {f"/dev/{d}" for d in ("null", "zero", "full", "random", "urandom", "shm")}
    assert points <= {"/", "/usr", "/etc", "/tmp", "/proc"} | python | devices, points


@pytest.mark.slow  # 3.2 GB of memory touched
@pytest.mark.parametrize("backend", BACKENDS)
def test_memory_is_capped_per_run_not_per_process(request, backend):
    sb = _backend_or_skip(request, backend)
    program = (
        "import os, time\nkids = []\nfor _ in range(4):\n    pid = os.fork()\n    if pid == 0:\n"
        "        try:\n            b = bytearray(800 << 20)\n            b[::4096] = b'x' * len(b[::4096])\n"
        "            time.sleep(1)\n            os._exit(0)\n"
        "        except MemoryError:\n            os._exit(3)\n"
        "    kids.append(pid)\nprint(sum(os.waitpid(p, 0)[1] == 0 for p in kids))\n"
    )
    r = sb.run(program, limits=Limits(timeout_s=60, memory_mb=1024))
    assert r.memory_scope in ("cgroup v1", "cgroup v2", "docker"), r
    assert r.stdout.strip() != b"4", r  # 3.2 GB never fit in the run's 1 GiB


def test_a_verdict_says_when_memory_was_capped_per_process_only():
    if not has_data("evalplus"):
        pytest.skip("EvalPlus data not found; set LOPD_DATA_DIR")
    from envs.evalplus.verifier import EvalPlusVerifier
    from envs.sandbox import SandboxConfig

    problem_code = "def add(x, y):\n    return x + y\n"
    with EvalPlusVerifier("humaneval", sandbox_config=SandboxConfig(isolation="none")) as unconfined:
        verdict = unconfined.check("HumanEval/53", problem_code)
    assert verdict.passed and "each process" in verdict.to_json()["memory"]
    if os.geteuid() == 0:  # full isolation: the run's cgroup capped it, nothing to say
        with EvalPlusVerifier("humaneval", sandbox_config=SandboxConfig(isolation="full")) as jailed:
            assert "memory" not in jailed.check("HumanEval/53", problem_code).to_json()


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_without_the_seccomp_filter_a_backend_refuses_to_start(monkeypatch, backend):
    from envs.sandbox import SandboxConfig, SandboxUnavailable, make_sandbox, seccomp

    def missing():
        raise ImportError("No module named 'pyseccomp'")

    monkeypatch.setattr(seccomp, "candidate_filter", missing)
    with pytest.raises(SandboxUnavailable, match="seccomp filter .*pyseccomp"):
        make_sandbox(SandboxConfig(backend=backend)).run("print(1)")


def test_an_answer_already_in_the_pipe_is_not_late():
    """A grader busy comparing a big output reads the next answer past its deadline: it still counts
    (Mbpp/255's plus input 86 arrives while input 85's 1.6M tuples are compared)."""
    from envs.sandbox.guest import MsgReader, send_msg

    r, w = os.pipe()
    send_msg(w, "O", b"x")
    assert MsgReader(r).read(0.0) == ("O", b"x")
    os.close(w)
    os.close(r)
