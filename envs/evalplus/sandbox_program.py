"""The EvalPlus grader that runs INSIDE the sandbox (sent as source after envs/sandbox/guest.py).

Needs only the stdlib and the evalplus package (present in the venv and in the docker image).

stdin frames (pickles written by the host, see envs/evalplus/verifier.py):
  1. the job: mode, dataset, entry_point, code, atol, time-limit settings;
  2. per-phase data: inputs and reference times (and, in ``official`` mode only, expected outputs);
  3. ``strict`` mode only: the expected outputs, read after the workers are forked.
stdout: one JSON line {"base": [status, details], "plus": [status, details]}.

``official``: evalplus 0.3.1's own ``untrusted_check`` per phase, i.e. its process, time limits,
reliability guard and in-process comparison, quirks included (an object whose ``__eq__`` always says
True passes; HumanEval/32 always fails). Its 4 GiB guard is an RLIMIT_AS, which counts the address
space the check process inherits; under ``evalplus.evaluate`` that is a pool worker forked from a main
process holding every task's expected outputs (and the ``datasets`` import), so first the runner maps
inaccessible address space (no memory behind it) up to ``job["official_vm_bytes"]``, the size of that
main process: the check gets evaluate's memory headroom, not 4 GiB (see docs/SANDBOX.md).

``strict``: the same per-input limits and guard, but the model's code never holds the expected
outputs. A worker sends each return value to this runner marshalled (exact built-in types only; any
other object fails), and the runner compares them with evalplus's rules on plain values. The runner
also keeps each input's time limit itself (:func:`strict_phase`), so code that switches off its own
timer still fails an input it is too slow for.
"""

from __future__ import annotations

import marshal
import os
import pickle
import time

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

PASS, FAIL, TIMEOUT = "pass", "fail", "timeout"
GRACE_S = 0.5
"""How long past an input's time limit the runner waits before it kills the worker: the worker's own
timer (evalplus's ``time_limit``) fires first for any code that leaves it on, so honest verdicts are
evalplus's; code that switches it off gains at most this."""
OUTPUT_BYTES_PER_S = 20e6
"""Marshalling and piping an output of the expected one's size is allowed to go this slowly (a tenth
of what the 2-core dev VM measures), on top of GRACE_S: evalplus's limit covers only the call."""


def preimport():
    """Everything the runner imports, before any candidate runs (a lazy import could find a module a
    candidate planted)."""
    import marshal  # noqa: F401
    import mmap  # noqa: F401
    import pickle  # noqa: F401

    import numpy  # noqa: F401
    import evalplus.eval  # noqa: F401
    import evalplus.eval._special_oracle  # noqa: F401
    import evalplus.eval.utils  # noqa: F401


def output_allowance(expected):
    """Seconds more an input gets for marshalling and piping an output of ``expected``'s size back
    (asked only once its limit + GRACE_S have passed: most outputs are small, and sizing one costs)."""
    try:
        return len(marshal.dumps(expected)) / OUTPUT_BYTES_PER_S
    except ValueError:
        return 0.0


def phase_limits(ref_time, min_time_limit, factor, fast_check=True):
    """Per-input time limits and the per-phase budget exactly as evalplus's ``untrusted_check``."""
    time_limits = [max(min_time_limit, factor * t) for t in ref_time]
    timeout = min(os.getenv("EVALPLUS_TIMEOUT_PER_TASK", 60), sum(time_limits)) + 1
    if not fast_check:
        timeout += 1
    return time_limits, timeout


# ---- strict: the worker side -----------------------------------------------------------------
def strict_worker(msg_fd, job, inputs, time_limits):
    """Mirror evalplus's ``unsafe_execute`` environment; report each return value, not a verdict."""
    from evalplus.eval import query_maximum_memory_bytes
    from evalplus.eval.utils import create_tempdir, reliability_guard, swallow_io, time_limit

    dumps, send, entry_point = marshal.dumps, send_msg, job["entry_point"]
    with create_tempdir():
        reliability_guard(maximum_memory_bytes=query_maximum_memory_bytes())
        exec_globals = {}
        try:
            with swallow_io():
                exec(job["code"], exec_globals)
                fn = exec_globals[entry_point]
        except BaseException:
            send(msg_fd, "S")
            return
        send(msg_fd, "B")  # the code is loaded: the runner's clock for the first input starts
        for i, inp in enumerate(inputs):
            try:
                with time_limit(time_limits[i]):
                    with swallow_io():
                        out = fn(*inp)
            except BaseException:
                send(msg_fd, "X")
                return
            try:
                send(msg_fd, "O", dumps(out))
            except ValueError:  # not an exact built-in value: strict mode rejects it
                send(msg_fd, "U")
        send(msg_fd, "D")


# ---- strict: the runner side -----------------------------------------------------------------
def compare(dataset, entry_point, out, exp, inp, atol):
    """evalplus 0.3.1's per-input check (unsafe_execute) on plain values.

    Returns (passed, atol, counted): ``atol`` as the loop carries it on (it sticks at 1e-6 after the
    first float output when the task's atol is 0), ``counted`` False for HumanEval/32's ``continue``
    that never marks the input passed (the 0.3.1 quirk that fails every find_zero solution).
    """
    import numpy as np
    from evalplus.eval import _digit_distance_nums, _poly, _surface_Area, is_floats
    from evalplus.eval._special_oracle import MBPP_OUTPUT_NOT_NONE_TASKS, MBPP_OUTPUT_SET_EQ_TASKS

    try:
        exact_match = out == exp
        if dataset == "mbpp":
            if entry_point == "are_equivalent":
                exact_match = exact_match or True
            elif entry_point == "sum_div":
                exact_match = exact_match or out == 0
            elif entry_point == "surface_Area":
                exact_match = exact_match or abs(out - _surface_Area(*inp)) <= atol
            elif entry_point == "digit_distance_nums":
                exact_match = exact_match or out == _digit_distance_nums(*inp)
            elif entry_point in MBPP_OUTPUT_SET_EQ_TASKS:
                exact_match = set(out) == set(exp)
            elif entry_point in MBPP_OUTPUT_NOT_NONE_TASKS:
                if isinstance(out, bool):
                    exact_match = out == exp
                else:
                    exact_match = exp == (out is not None)
        if dataset == "humaneval" and entry_point == "find_zero":
            assert abs(_poly(*inp, out)) <= atol
            return True, atol, False
        if atol == 0 and is_floats(exp):
            atol = 1e-6
        if not exact_match and atol != 0:
            assert type(out) == type(exp)  # noqa: E721  (evalplus compares exact types)
            if isinstance(exp, (list, tuple)):
                assert len(out) == len(exp)
            assert np.allclose(out, exp, rtol=1e-07, atol=atol)
        else:
            assert exact_match
    except BaseException:
        return False, atol, True
    return True, atol, True


class _NotNone:
    """A non-plain output of an output-not-None MBPP task: only its not-None-ness is known."""


def strict_phase(job, pid, msg_r, go_w, inputs, expected, time_limits, budget):
    reader = MsgReader(msg_r)
    state = {"details": [], "stat": None, "counted": True, "atol": job["atol"], "due": None, "more": True}
    deadline = time.monotonic() + budget
    release(go_w)
    try:
        while state["stat"] is None:
            due = min(deadline, state["due"] or deadline)
            try:
                msg = reader.read(due - time.monotonic())
            except TimeoutError:
                if due >= deadline:
                    break
                if state["more"]:  # the input's limit has passed: allow for its output's size once
                    state["more"] = False
                    state["due"] = due + output_allowance(expected[len(state["details"])])
                    continue
                state["details"].append(False)  # it ran past its limit: the worker's timer was off
                state["stat"] = FAIL
                break
            if msg is None:  # the worker died without finishing: evalplus's "unknown" state
                break
            _strict_message(job, state, msg, inputs, expected, time_limits)
    except ValueError:
        state["stat"] = FAIL
    finally:
        kill_worker(pid)
        os.close(msg_r)
    details, stat = state["details"], state["stat"] or TIMEOUT
    if stat == PASS and (not state["counted"] or not all(details)):
        stat = FAIL
    return stat, details


def _start_clock(state, time_limits, i):
    """Input ``i`` starts now; it may take its limit + GRACE_S (+ its output's allowance, see
    strict_phase). One clock per input without a message per input: the worker starts input i+1 as
    soon as it has sent input i's output, so that message starts i+1's clock."""
    state["due"], state["more"] = time.monotonic() + time_limits[i] + GRACE_S, True


def _strict_message(job, state, msg, inputs, expected, time_limits):
    """Apply one worker message to the phase's ``state`` (details, stat, atol, the input's deadline)."""
    kind, payload = msg
    details, i = state["details"], len(state["details"])
    if kind in ("S", "X"):
        if kind == "X":
            details.append(False)
        state["stat"] = FAIL
    elif kind == "D":
        state["stat"] = PASS if i == len(inputs) else FAIL
    elif kind == "B" and state["due"] is None and i == 0:
        if inputs:  # a phase without inputs (Mbpp/793's plus) passes on its "D"
            _start_clock(state, time_limits, 0)
    elif kind in ("O", "U") and state["due"] is not None and i < len(inputs):
        state["due"] = None
        _grade_output(job, state, kind, payload, inputs, expected)
        if state["stat"] is None and i + 1 < len(inputs):  # the worker went on to the next input at once;
            _start_clock(state, time_limits, i + 1)  # its clock starts once this runner is done here
    else:  # out of order or unknown: only a tampered worker sends it
        state["stat"] = FAIL


def _grade_output(job, state, kind, payload, inputs, expected):
    """Compare the worker's output for the next input with the expected one (evalplus's rules)."""
    details = state["details"]
    i = len(details)
    out = _NotNone() if kind == "U" and job.get("output_not_none") else None
    if kind == "O":
        try:
            out = marshal.loads(payload)
        except Exception:
            state["stat"] = FAIL
            return
    elif out is None:  # strict: an object that is not plain data fails
        details.append(False)
        state["stat"] = FAIL
        return
    ok, state["atol"], counted = compare(
        job["dataset"], job["entry_point"], out, expected[i], inputs[i], state["atol"]
    )
    state["counted"] = state["counted"] and counted
    details.append(bool(ok))
    if not ok:
        state["stat"] = FAIL


def run_strict(job, phases):
    """Fork one waiting worker per phase BEFORE reading the expected outputs, then grade each."""
    import evalplus.eval
    import evalplus.eval.utils  # noqa: F401

    workers = []
    for ph in phases:
        time_limits, timeout = phase_limits(
            ph["ref_time"], job["min_time_limit"], job["gt_time_limit_factor"]
        )
        pid, msg_r, go_w = fork_worker(strict_worker, job, ph["inputs"], time_limits)
        workers.append((pid, msg_r, go_w, time_limits, timeout))
    expected = pickle.loads(read_frame(0))
    result = {}
    for ph, (pid, msg_r, go_w, time_limits, timeout) in zip(phases, workers):
        # evalplus joins the phase process for timeout + 1 s before killing it
        result[ph["name"]] = strict_phase(
            job, pid, msg_r, go_w, ph["inputs"], expected[ph["name"]], time_limits, timeout + 1
        )
    return result


# ---- official ----------------------------------------------------------------------------------
def vm_size():
    """This process's mapped address space in bytes (VmSize: what RLIMIT_AS limits), or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def reserve_address_space(nbytes):
    """Map ``nbytes`` of address space that can be neither read nor written: it holds no memory and is
    not committed, but a forked child inherits it and RLIMIT_AS counts it. None when nothing is mapped."""
    import mmap

    if nbytes <= 0:
        return None
    try:
        return mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=0)  # PROT_NONE
    except (OSError, ValueError, OverflowError):
        return None


def run_official(job, phases, base_vm=None):
    """``base_vm``: this runner's VmSize before the phases were loaded. The check processes then hold
    what evalplus.evaluate's would: its main process (``official_vm_bytes``) plus the task's data."""
    from evalplus.eval import untrusted_check

    target = int(job.get("official_vm_bytes") or 0)
    reserved = reserve_address_space(target - base_vm) if target and base_vm else None
    result = {}
    for ph in phases:
        stat, details = untrusted_check(
            job["dataset"],
            job["code"],
            ph["inputs"],
            job["entry_point"],
            expected=ph["expected"],
            atol=job["atol"],
            ref_time=ph["ref_time"],
            fast_check=True,
            min_time_limit=job["min_time_limit"],
            gt_time_limit_factor=job["gt_time_limit_factor"],
        )
        result[ph["name"]] = [stat, [bool(d) for d in details]]
    if reserved is not None:
        reserved.close()
    return result


def main():
    guard_runner()
    preimport()
    job = pickle.loads(read_frame(0))
    base_vm = vm_size()
    phases = pickle.loads(read_frame(0))
    if job["mode"] == "official":
        result = run_official(job, phases, base_vm)
    else:
        result = {k: list(v) for k, v in run_strict(job, phases).items()}
    emit_result(result)
