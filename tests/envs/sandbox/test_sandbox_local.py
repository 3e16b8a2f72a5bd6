"""The local backend: the interface contract, limits, and what full isolation confines."""

import os
import signal
import sys
from pathlib import Path

import pytest

from envs.sandbox import Limits, SandboxConfig, SandboxUnavailable, make_sandbox
from envs.sandbox.base import compose_program
from envs.sandbox.config import sandbox_config
from sandbox_timing import wait_until  # noqa: E402

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="full isolation needs root")


def test_stdin_stdout_files_and_exit_code(local_sandbox):
    r = local_sandbox.run(
        "import sys\nprint(input()[::-1]); print(open('data/x.txt').read()); sys.exit(3)",
        stdin=b"abc\n",
        files={"data/x.txt": "hello"},
    )
    assert r.exit_code == 3 and r.stdout == b"cba\nhello\n" and not r.ok


def test_uncaught_exception_is_exit_1_with_traceback(local_sandbox):
    r = local_sandbox.run("raise ValueError('boom')")
    assert r.exit_code == 1 and b"ValueError: boom" in r.stderr


def test_signal_death_is_reported(local_sandbox):
    r = local_sandbox.run("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    assert r.exit_code is None and r.signal == signal.SIGSEGV


def test_wall_clock_timeout_kills(local_sandbox):
    r = local_sandbox.run("while True: pass", limits=Limits(timeout_s=0.5))
    assert r.timed_out and r.exit_code is None and r.duration_s < 3


def test_output_cap_kills_the_flood(local_sandbox):
    r = local_sandbox.run(
        "while True: print('x' * 4096)", limits=Limits(timeout_s=10, max_output_bytes=100_000)
    )
    assert r.output_truncated and len(r.stdout) <= 100_000 and r.duration_s < 5


def test_memory_rlimit(local_sandbox):
    r = local_sandbox.run("x = bytearray(1 << 33)", limits=Limits(memory_mb=512))
    assert r.exit_code == 1 and b"MemoryError" in r.stderr


@pytest.mark.slow
def test_cpu_rlimit(local_sandbox):
    r = local_sandbox.run("while True: pass", limits=Limits(timeout_s=10, cpu_s=1))
    assert not r.timed_out and r.signal in (signal.SIGXCPU, signal.SIGKILL)


def test_file_size_limit(local_sandbox):
    r = local_sandbox.run("open('big', 'wb').write(b'x' * (3 << 20))", limits=Limits(fsize_mb=1))
    assert not r.ok


def test_fresh_work_dir_each_run(local_sandbox):
    assert local_sandbox.run("open('mark', 'w').write('1')").ok
    r = local_sandbox.run("import os; print(os.listdir('.'))")
    assert r.stdout.strip() == b"[]"


def test_environment_is_clean(local_sandbox):
    r = local_sandbox.run("import os; print(sorted(os.environ))")
    names = eval(r.stdout)
    assert set(names) <= {
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TMPDIR",
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "PYTHONDONTWRITEBYTECODE",
    }


def test_concurrent_runs_are_independent(local_sandbox):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda i: local_sandbox.run(f"print({i} * 2)").stdout, range(8)))
    assert outs == [f"{i * 2}\n".encode() for i in range(8)]


@needs_root
def test_full_isolation_confines(local_sandbox):
    from envs.data import data_dir

    assert local_sandbox.isolation == "full"
    r = local_sandbox.run(
        "import os, socket, sys\n"
        "print(os.getuid() != 0, os.getpid(), sorted(p for p in os.listdir('/proc') if p.isdigit()))\n"
        "print(sorted(os.listdir('/')))\n"
        f"print(os.path.exists({str(data_dir())!r}), os.path.exists(os.path.expanduser('~root/.ssh')))\n"
        "try:\n    socket.create_connection(('127.0.0.1', 22), 1)\n"
        "except OSError as e:\n    print('net', e.errno)\n"
    )
    lines = r.stdout.decode().splitlines()
    assert lines[0] == "True 2 ['1', '2']"  # own pid namespace: only init and the program
    top = set(eval(lines[1]))
    # the checkout (and so the venv) may live anywhere: CI clones under /check
    interpreter_tops = {Path(p).resolve().parts[1] for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    assert top <= {
        "bin",
        "sbin",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "usr",
        "etc",
        "proc",
        "tmp",
        "dev",
        "root",
        "home",
        "opt",
        *interpreter_tops,
    }  # only the read-only system dirs and the interpreter's prefix
    assert lines[2] == "False False"  # no benchmark data (canonical solutions), no host home
    assert lines[3].startswith("net ")


def test_none_isolation_still_limits_and_cleans(tmp_path):
    with make_sandbox(SandboxConfig(isolation="none")) as sb:
        assert sb.isolation == "none"
        r = sb.run("import os; print(os.getcwd()); open('f', 'w').write('x')")
        assert r.ok
        workdir = r.stdout.decode().strip()
        assert not os.path.exists(workdir)  # removed after the run
        assert sb.run("while True: pass", limits=Limits(timeout_s=0.5)).timed_out


def _gone(pid: int, within_s: float = 2.0) -> bool:
    """``pid`` has exited (a zombie counts: whoever adopted it may reap lazily)."""
    def exited() -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        except (FileNotFoundError, ProcessLookupError):
            return True

    return wait_until(exited, within_s)


@pytest.mark.parametrize(
    "how,program,limits",
    [  # write_pid records the process that must not outlive the run
        ("timeout", "write_pid(os.getpid())\ntime.sleep(40)", Limits(timeout_s=0.5)),
        ("timeout", "write_pid(os.getpid())\nwhile True: pass", Limits(timeout_s=0.5)),
        (  # a child sleeps while its parent floods the output
            "output cap",
            "if os.fork() == 0:\n    write_pid(os.getpid())\n    time.sleep(40)\n"
            "while not os.path.exists(PID): time.sleep(0.01)\n"  # flood only once the child is on record
            "while True: print('x' * 4096)",
            Limits(timeout_s=10, max_output_bytes=100_000),
        ),
    ],
)
def test_none_isolation_kills_the_whole_process_group(tmp_path, how, program, limits):
    pid_file = tmp_path / "pid"
    prelude = (  # written then renamed: the pid file is never seen half-written
        f"import os, time\nPID = {str(pid_file)!r}\n"
        "def write_pid(pid):\n    open(PID + '.tmp', 'w').write(str(pid))\n    os.replace(PID + '.tmp', PID)\n"
    )
    with make_sandbox(SandboxConfig(isolation="none")) as sb:
        r = sb.run(prelude + program, limits=limits)
    assert (r.timed_out if how == "timeout" else r.output_truncated), r
    pid = int(pid_file.read_text())
    assert _gone(pid), f"pid {pid} outlived the run ({how})"


def test_full_isolation_without_root_is_a_clear_error():
    if os.geteuid() == 0:
        pytest.skip("running as root: full isolation is available")
    with pytest.raises(SandboxUnavailable, match="root"):
        make_sandbox(SandboxConfig(isolation="full")).run("pass")


def test_zygote_restarts_after_dying(local_sandbox):
    assert local_sandbox.run("print(1)").ok
    local_sandbox._proc.kill()
    local_sandbox._proc.wait()
    assert local_sandbox.run("print(2)").stdout == b"2\n"


def test_unknown_backend_and_config_parsing():
    with pytest.raises(ValueError, match="backend"):
        make_sandbox(SandboxConfig(backend="nope"))  # type: ignore[arg-type]
    cfg = sandbox_config({"backend": "docker", "limits": {"timeout_s": 3}, "extra_ro_paths": ["/opt"]})
    assert cfg.backend == "docker" and cfg.limits.timeout_s == 3 and cfg.extra_ro_paths == ("/opt",)
    with pytest.raises(TypeError):
        sandbox_config(["docker"])  # type: ignore[arg-type]


def test_compose_program_hoists_future_imports():
    prog = compose_program(
        "from __future__ import annotations\nA = 1\n",
        "from __future__ import annotations\nB = A\n",
        call="print(B)",
    )
    assert prog.count("from __future__") == 1 and prog.startswith("from __future__")
    compile(prog, "<p>", "exec")


def test_file_names_must_stay_inside(local_sandbox):
    r = local_sandbox.run("print(1)", files={"../evil": "x"})
    assert r.error and "relative" in r.error
