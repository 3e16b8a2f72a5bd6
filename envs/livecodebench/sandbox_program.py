"""The LiveCodeBench grader that runs INSIDE the sandbox (sent as source after envs/sandbox/guest.py).

Stdlib only. It reproduces lcb_runner's ``run_test`` (evaluation/testing_util.py) and the
``check_correctness`` wrapper around it, as they behave:

* the code runs in a fresh process with lcb_runner's reliability guard, ``sys.stdin`` on /dev/null
  (as in a multiprocessing child) and ``sys.set_int_max_str_digits(50000)``;
* stdin problems: ``if __name__ == '__main__'`` unwrapped, the module body wrapped into
  ``wrapped_function`` after lcb's import header, stdout captured, ``sys.stdin`` replaced by lcb's mock
  of it (:class:`LcbStdin`: ``read()`` the whole input on every call, ``readlines()`` split on "\\n", a
  ``buffer`` whose ``readline()`` always gives the first line, not iterable) and ``builtins.open`` /
  the header-bound ``stdin.read*`` patched as lcb does; lines compared stripped, exactly or token-wise
  as ``Decimal``;
* call-based problems: header + code, ``Solution()`` when the code mentions ``class Solution``, each
  input line ``json.loads``'d into positional args, a tuple result becomes a list, then ``==``;
* ``signal.alarm(6)`` per test and for compilation; codes True, -2 wrong answer (call-based: False),
  -3 time limit, -4 runtime error, stopping at the first failure; an exception around the grading gives
  [-4];
* the global limit (6 + 1) * tests + 5 s: when the process does not report in time, or dies,
  lcb_runner's ``metadata_list[0]`` on an empty list raises, so the recorded result is [-2] with
  error_code -5 (it meant [-1] * tests; see docs/SANDBOX.md).

``strict`` mode also keeps the 6 s limits itself (from the worker's start message of each test, and of
the compilation): code that switches off its own alarm still fails a test it is too slow for.

stdin frames (JSON): 1. the job: mode, code, inputs, fn_name, timeout (+ outputs in ``official`` mode);
2. ``strict`` mode only, read after the worker is forked: the outputs; 3. the run's key.
stdout: one sealed JSON line {"results": [...], "metadata": {...}} (envs/sandbox/guest.py).
"""

from __future__ import annotations

import faulthandler
import json
import marshal
import os
import signal
import sys
import time
from functools import partial

try:  # on the host (tests); inside the sandbox the guest helpers precede this source
    from envs.sandbox.guest import (
        MsgReader,
        emit_result,
        fork_worker,
        guard_runner,
        kill_worker,
        read_frame,
        release,
        send_msg,
    )
except ImportError:
    pass

# lcb_runner's import header: star-imports of these modules (plus builtins and typing), then plain imports.
# fmt: off
_HEADER_MODULES = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random",
                   "statistics", "itertools", "functools", "operator", "io", "sys", "json")
# fmt: on
IMPORT_HEADER = "\n".join(
    [f"from {m} import *" for m in (*_HEADER_MODULES, "builtins", "typing")]
    + [f"import {m}" for m in _HEADER_MODULES]
    + ["sys.setrecursionlimit(50000)", ""]
)


GRACE_S = 0.5
"""How long past the 6 s limit the strict runner waits before it kills the worker: the worker's own
alarm fires first for any code that leaves it on; code that switches it off gains at most this."""
OUTPUT_BYTES_PER_S = 20e6
"""Passing back an output of the expected one's size may go this slowly, on top of GRACE_S."""


class TimeoutException(Exception):
    pass


def preimport():
    """What the runner imports, before any candidate runs (a lazy import could find a planted module)."""
    import decimal  # noqa: F401


def _on_alarm(signum, frame):
    print("timeout occured: alarm went off")
    raise TimeoutException


def _truncate(s, length=300):
    s = s if isinstance(s, str) else str(s)
    return s if len(s) <= length else s[: length // 2] + "...(truncated) ..." + s[-length // 2 :]


class Capturing(list):
    """sys.stdout into a StringIO for the block; its text is appended on exit."""

    def __enter__(self):
        import io

        self._stdout = sys.stdout
        sys.stdout = self._buf = io.StringIO()
        self._buf.close = lambda *a: 1
        return self

    def __exit__(self, *exc):
        self.append(self._buf.getvalue())
        del self._buf
        sys.stdout = self._stdout


def unwrap_main_guard(code):
    """A trailing ``if __name__ == '__main__':`` block becomes top-level code."""
    import ast

    try:
        tree = ast.parse(code)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            code = ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body)
    except Exception:
        pass
    return code


def wrap_in_function(code):
    """Imports stay at the top (after the header); everything else becomes ``wrapped_function``."""
    import ast

    try:
        tree = ast.parse(code)
        imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
        body = [s for s in tree.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
        fn = ast.FunctionDef(
            name="wrapped_function",
            args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
            body=body,
            decorator_list=[],
            lineno=-1,
        )
        return IMPORT_HEADER + "\n" + ast.unparse(imports) + "\n" + ast.unparse(fn)
    except Exception:
        return code


def compile_solution(code, timeout):
    from types import ModuleType

    signal.alarm(timeout)
    try:
        module = ModuleType("tmp_sol", "")
        exec(code, module.__dict__)
        compiled = module.Solution() if "class Solution" in code else module
        assert compiled is not None
    finally:
        signal.alarm(0)
    return compiled


class LcbStdinBytes:
    """``sys.stdin.buffer`` of a stdin test, as lcb_runner's mock has it: two methods and nothing else
    (no ``readlines``, no ``readable``, not iterable)."""

    def __init__(self, text):
        self._data = text.encode("utf-8")

    def read(self, *_ignored):
        return self._data  # the whole input, on every call

    def readline(self, *_ignored):
        return self._data.split(b"\n")[0] + b"\n"  # always the FIRST line: it never advances


class LcbStdin:
    """What ``sys.stdin`` is during one lcb_runner stdin test (its mock with a ``buffer``).

    ``read`` gives the whole input on every call (whatever ``readline`` consumed); ``readline``
    advances through the input; ``readlines`` is ``text.split("\\n")``, without the newlines; every
    other attribute is taken from a StringIO of the input, looked up per instance, so what Python
    looks up on the class is missing: ``for line in sys.stdin``, ``next(sys.stdin)`` and ``with
    sys.stdin`` raise TypeError, and ``fileno()`` raises io.UnsupportedOperation."""

    def __init__(self, text):
        import io

        self._text = text
        self._cursor = io.StringIO(text)
        self.buffer = LcbStdinBytes(text)

    def read(self, *_ignored):
        return self._text

    def readline(self, *size):
        return self._cursor.readline(*size)

    def readlines(self, *_ignored):
        return self._text.split("\n")

    def __getattr__(self, name):
        return getattr(self._cursor, name)


def call_with_stdin(method, inputs):
    """Run a wrapped stdin program with the test input behind sys.stdin, open() and stdin.*."""
    from unittest.mock import mock_open, patch

    if isinstance(inputs, list):
        inputs = "\n".join(inputs)
    lines = iter(inputs.split("\n"))
    # Entered bottom-up, as lcb's decorators: read/readlines/readline land on the real stdin (which
    # the header's `from sys import *` bound as `stdin`; past the last line its readline raises
    # StopIteration), then sys.stdin itself becomes the mock, whose own methods apply. builtins.open
    # is patched, but the header's `from io import *` / `from builtins import *` bound the name `open`
    # to the real one, so only an explicit `builtins.open(...)` gets the input.
    patches = [
        patch("sys.stdin.read", lambda *a: inputs),
        patch("sys.stdin.readlines", lambda *a: inputs.split("\n")),
        patch("sys.stdin.readline", lambda *a: next(lines)),
        patch("sys.stdin", LcbStdin(inputs)),
        patch("builtins.open", mock_open(read_data=inputs)),
    ]
    entered = []
    try:
        for p in patches:
            p.__enter__()
            entered.append(p)
        try:
            return method()
        except SystemExit:
            pass
    finally:
        for p in reversed(entered):
            p.__exit__(None, None, None)


def stripped_lines(text):
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line):
    from decimal import Decimal

    try:
        return True, [Decimal(tok) for tok in line.split()]
    except Exception:
        return False, []


def stdout_verdict(prediction, expected):
    """None when ``prediction`` matches, else the wrong-answer message."""
    got, want = stripped_lines(prediction), stripped_lines(expected)
    if len(got) != len(want):
        return "Wrong answer: mismatched output length"
    for i, (a, b) in enumerate(zip(got, want)):
        if a == b:
            continue
        ok_a, da = _decimals(a)
        if not ok_a:
            return f"Wrong answer at output_line_idx={i}"
        ok_b, db = _decimals(b)
        if not ok_b or da != db:
            return f"Wrong answer at output_line_idx={i}"
    return None


def lcb_guard():
    """lcb_runner's reliability_guard() (no memory limit): the same names disabled."""
    import builtins
    import shutil
    import subprocess

    faulthandler.disable()
    builtins.quit = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in (
        "kill",
        "system",
        "putenv",
        "remove",
        "removedirs",
        "rmdir",
        "fchdir",
        "setuid",
        "fork",
        "forkpty",
        "killpg",
        "rename",
        "renames",
        "truncate",
        "replace",
        "unlink",
        "fchmod",
        "fchown",
        "chmod",
        "chown",
        "chroot",
        "lchflags",
        "lchmod",
        "lchown",
        "getcwd",
        "chdir",
    ):
        setattr(os, name, None)
    shutil.rmtree = shutil.move = shutil.chown = None
    subprocess.Popen = None
    builtins.help = None
    for mod in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[mod] = None


def _error(code, message, **extra):
    return dict({"error_code": code, "error_message": message}, **extra)


_RAISED = {-3: "Time Limit Exceeded", -4: "Runtime Error"}


def _wrong_answer(message, output, inputs, expected):
    return _error(
        -2, message, output=_truncate(output), inputs=_truncate(inputs), expected=_truncate(expected)
    )


# ---- the worker ------------------------------------------------------------------------------
def grade_in_worker(job, report, begin=lambda i: None):
    """lcb's run_test. ``report(i, outcome)`` receives each test's raw outcome in strict mode;
    in official mode (job has outputs) the worker compares itself. ``begin(i)`` is called as test i
    starts, ``begin(-2)`` and ``begin(-1)`` around the compilation. Returns (results, metadata)."""
    grade = _grade_stdin if job["fn_name"] is None else _grade_calls
    return grade(job, report, begin)


def _timed_test(timeout, run, then=None):
    """One test inside lcb's guard: ``run()`` under the alarm, faulthandler on, then ``then(its
    value)`` with the alarm off but still guarded. Returns (what either raised, then's value)."""
    signal.alarm(timeout)
    faulthandler.enable()
    try:
        value = run()
        signal.alarm(0)
        return None, then(value) if then is not None else None
    except Exception as e:
        signal.alarm(0)
        return e, None
    finally:
        signal.alarm(0)
        faulthandler.disable()


def _raised(results, report, i, e, shown_input):
    """Test ``i`` raised ``e``: -3 for lcb's TimeoutException, else -4; the grading ends."""
    code_ = -3 if "timeoutexception" in repr(e).lower() else -4
    results.append(code_)
    report(i, ("E", code_, repr(e)))
    return results, _error(code_, _RAISED[code_], error=repr(e), inputs=_truncate(shown_input))


def _grade_stdin(job, report, begin):
    """The stdin tests: each input's stdout, compared line by line (official) or reported (strict)."""
    timeout, official, outputs = job["timeout"], "outputs" in job, job.get("outputs")
    code = wrap_in_function(unwrap_main_guard(job["code"]))
    begin(-2)
    compiled = compile_solution(code, timeout)
    begin(-1)
    method = getattr(compiled, "wrapped_function", None)
    if method is None:
        raise TypeError("cannot unpack non-iterable NoneType object")
    results = []
    for i, inp in enumerate(job["inputs"]):
        begin(i)
        with Capturing() as captured:
            raised, _ = _timed_test(timeout, partial(call_with_stdin, method, inp))
        if raised is not None:
            return _raised(results, report, i, raised, inp)
        if not official:
            report(i, ("T", captured[0]))
            continue
        wrong = stdout_verdict(captured[0], outputs[i])
        if wrong is not None:
            results.append(-2)
            return results, _wrong_answer(wrong, captured[0], inp, outputs[i])
        results.append(True)
    return results, {"execution time": 0.0}


def _grade_calls(job, report, begin):
    """The call-based tests: each call's return value, compared with ``==`` (official) or reported."""
    timeout, official = job["timeout"], "outputs" in job
    begin(-2)
    compiled = compile_solution(IMPORT_HEADER + "\n\n" + job["code"], timeout)
    begin(-1)
    try:
        assert hasattr(compiled, job["fn_name"])
        method = getattr(compiled, job["fn_name"])
    except Exception:
        raise TypeError("cannot unpack non-iterable NoneType object") from None
    args_list = [[json.loads(line) for line in inp.split("\n")] for inp in job["inputs"]]
    expected = [json.loads(o) for o in job["outputs"]] if official else None
    results = []
    for i, args in enumerate(args_list):
        begin(i)
        check = partial(_call_outcome, i, args, expected, results, report)
        raised, wrong = _timed_test(timeout, partial(method, *args), check)
        if raised is not None:
            return _raised(results, report, i, raised, args)
        if wrong is not None:
            return results, wrong
    return results, {"execution time": 0.0}


def _call_outcome(i, args, expected, results, report, prediction):
    """Test ``i``'s return value, reported (strict: no ``expected``) or compared: the wrong answer's
    metadata, else None. Runs inside lcb's guard, so what it raises is the test's runtime error."""
    if isinstance(prediction, tuple):
        prediction = list(prediction)
    if expected is None:
        try:
            report(i, ("V", marshal.dumps(prediction)))
        except ValueError:
            report(i, ("U",))
        return None
    ok = prediction == expected[i]
    results.append(True if ok else False)
    if not ok:
        return _wrong_answer("Wrong Answer", prediction, args, expected[i])
    return None


def lcb_worker(msg_fd, job):
    send, dumps = send_msg, marshal.dumps
    sys.set_int_max_str_digits(50000)
    sys.stdin = open(os.devnull)  # what a multiprocessing child gets
    signal.signal(signal.SIGALRM, _on_alarm)
    lcb_guard()

    def report(i, outcome):
        send(msg_fd, "O", dumps((i,) + tuple(outcome)))

    def begin(i):  # the runner's clock for test i (or, at -1, for the compilation) stops or starts
        send(msg_fd, "B", dumps(i))

    try:
        results, meta = grade_in_worker(job, report, begin)
    except Exception as e:  # run_test's own except around the grading
        results, meta = [-4], _error(-4, f"Error during testing: {e}")
    send(msg_fd, "R", json.dumps({"results": results, "metadata": meta}, default=str).encode())


# ---- the runner ------------------------------------------------------------------------------
def _global_failure():
    # lcb_runner: no result in time -> result [[-1]*n], then metadata_list[0] raises IndexError, so
    # evaluate_generations_by_problem keeps its initial [-2] and records a TestRunnerError.
    return {
        "results": [-2],
        "metadata": _error(-5, "TestRunnerError", error="IndexError('list index out of range')"),
        "global_timeout": True,
    }


def _bad(what="bad report"):
    return {"results": [-4], "metadata": _error(-4, f"Error during testing: {what}")}


def _late(st):
    """The verdict when the worker overran a limit the runner keeps (its own alarm was off)."""
    if st["stage"] != "tests":  # as a compile_solution timeout: run_test's error around the grading
        return _bad("")
    results = st["results"] + [-3]
    return {"results": results, "metadata": _error(-3, "Time Limit Exceeded", error="TimeoutException()")}


def strict_grade(job, outputs, reader, deadline):
    """Compare the worker's raw outcomes with ``outputs`` as lcb does, stopping at the first failure."""
    expected = None
    if job["fn_name"] is not None:
        try:
            expected = [json.loads(o) for o in outputs]
        except Exception as e:
            expected = e
    st = {"results": [], "stage": "setup", "due": None}
    while True:
        due = min(deadline, st["due"] or deadline)
        try:
            msg = reader.read(due - time.monotonic())
        except TimeoutError:
            return _late(st) if due < deadline else _global_failure()
        if msg is None:
            return _global_failure()
        done = _strict_message(job, outputs, expected, st, msg)
        if done is not None:
            return done


def _strict_message(job, outputs, expected, st, msg):
    """Apply one worker message to ``st``; the verdict when it ends the grading, else None."""
    kind, payload = msg
    results = st["results"]
    if kind == "R":  # the worker's own end: setup errors or every test reported
        try:
            own = json.loads(payload)
        except ValueError:
            return _global_failure()
        if own.get("results") == [-4] and not results:
            return {"results": [-4], "metadata": own.get("metadata", {})}
        if len(results) == len(outputs):
            return {"results": results, "metadata": {"execution time": 0.0}}
        return _bad("incomplete report")
    try:
        outcome = marshal.loads(payload)
    except Exception:
        return _bad()
    if kind == "B":
        return _begin(job, outputs, st, outcome)
    if kind != "O" or st["stage"] != "tests" or st["due"] is None:
        return _bad()
    if not isinstance(outcome, tuple) or len(outcome) < 2:
        return _bad()
    i = outcome[0]
    if i != len(results) or i >= len(outputs):
        return _bad()
    st["due"] = None
    if isinstance(expected, Exception):  # lcb parses every output before the first call
        return _bad(expected)
    return _outcome(job, outputs, expected, results, i, outcome)


def _begin(job, outputs, st, i):
    """Test ``i`` starts (-2: the compilation starts, -1: it is done): start or stop the runner's clock."""
    if i == -2 and st["stage"] == "setup":
        st["stage"], st["due"] = "compiling", time.monotonic() + job["timeout"] + GRACE_S
    elif i == -1 and st["stage"] == "compiling":
        st["stage"], st["due"] = "tests", None
    elif st["stage"] == "tests" and st["due"] is None and i == len(st["results"]) and i < len(outputs):
        st["due"] = time.monotonic() + job["timeout"] + GRACE_S + len(outputs[i]) / OUTPUT_BYTES_PER_S
    else:
        return _bad()
    return None


def _outcome(job, outputs, expected, results, i, outcome):
    """Grade test ``i``'s raw outcome; the verdict when it is a failure, else None."""
    tag = outcome[1]
    if tag == "E":
        code_ = -3 if outcome[2] == -3 else -4
        results.append(code_)
        return {
            "results": results,
            "metadata": _error(
                code_, "Time Limit Exceeded" if code_ == -3 else "Runtime Error", error=str(outcome[3])[:300]
            ),
        }
    if tag == "T" and job["fn_name"] is None:
        wrong = stdout_verdict(str(outcome[2]), outputs[i])
        if wrong is not None:
            results.append(-2)
            return {"results": results, "metadata": _error(-2, wrong)}
        results.append(True)
        return None
    if tag == "V" and job["fn_name"] is not None:
        try:
            ok = marshal.loads(outcome[2]) == expected[i]
        except Exception:
            ok = False
        results.append(True if ok is True else False)
        if results[-1] is not True:
            return {"results": results, "metadata": _error(-2, "Wrong Answer")}
        return None
    # "U": not plain data, which strict mode rejects
    results.append(False if job["fn_name"] is not None else -2)
    return {"results": results, "metadata": _error(-2, "Wrong Answer: not a plain value (strict)")}


def main():
    guard_runner()
    preimport()
    sys.set_int_max_str_digits(50000)
    job = json.loads(read_frame(0))
    n = len(job["inputs"])
    pid, msg_r, go_w = fork_worker(lcb_worker, job)
    outputs = job.get("outputs") if job["mode"] == "official" else json.loads(read_frame(0))
    deadline = time.monotonic() + (job["timeout"] + 1) * n + 5
    reader = MsgReader(msg_r)
    release(go_w)
    try:
        if job["mode"] == "official":
            res = _global_failure()
            while True:
                try:
                    msg = reader.read(deadline - time.monotonic())
                except TimeoutError:
                    break
                if msg is None:
                    break
                if msg[0] == "R":
                    try:
                        res = json.loads(msg[1])
                    except ValueError:
                        pass
                    break
        else:
            res = strict_grade(job, outputs, reader, deadline)
    finally:
        kill_worker(pid)
    emit_result(res)
