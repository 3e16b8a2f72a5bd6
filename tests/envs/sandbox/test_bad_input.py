"""Bad input to the code envs stays a clear failure, through ``env.step`` as the model's answer.

Answers that are not text, over-long answers, NUL bytes, a fork bomb, 10 GB to stdout and closed
stdio, for EvalPlus and LiveCodeBench on both backends: each gives reward 0 with a verdict that says
why, never raises, finishes within the run's own wall-clock limit, leaves no process or container
behind, and the same env then still grades a correct solution with reward 1. Non-text answers are
refused unread, as every env in envs/ refuses them (an error observation, never an exception).
"""

import time
from dataclasses import dataclass, field

import gymnasium as gym
import pytest

import envs  # noqa: F401
from envs.core import MAX_TEXT
from envs.data import has_data
from sandbox_timing import bound, wait_until  # noqa: E402

DOCKER = [pytest.mark.docker, pytest.mark.slow]
SLACK_S = 30.0
"""Beyond the run's own wall-clock limit: a container's start and removal, and the grader's own work,
on a loaded 2-core machine."""
LCB_SENIORS = (  # LiveCodeBench 2727 (staged public tests); the solution test_lcb_env.py uses
    "class Solution:\n    def countSeniors(self, details):\n"
    "        return sum(int(d[11:13]) > 60 for d in details)\n"
)


@dataclass
class Case:
    env_id: str
    data: str
    task_id: str
    header: str
    """The entry point's def line(s) a hostile solution is written into."""
    indent: str
    kwargs: dict = field(default_factory=dict)


ENVS = {
    "evalplus": Case("lopd/evalplus-humaneval-v0", "evalplus", "HumanEval/0",
                     "def has_close_elements(numbers, threshold):", "    "),
    # 2 s per test instead of lcb_runner's 6: the time-limited cases stay short
    "livecodebench": Case("lopd/livecodebench-v0", "livecodebench", "2727",
                          "class Solution:\n    def countSeniors(self, details):", "        ",
                          {"timeout": 2}),
}


def good_answer(case: Case) -> str:
    if case.data == "evalplus":
        from envs.evalplus.data import load_problems

        p = load_problems("humaneval")[case.task_id]
        return f"```python\n{p['prompt']}{p['canonical_solution']}\n```"
    return f"```python\n{LCB_SENIORS}```"


def at_entry(case: Case, answer: str, body: str) -> str:
    """``answer`` with ``body`` as the first statements of the entry point (inside the graded code:
    evalplus's sanitize drops lines the entry point does not use)."""
    lines = answer.split("\n")
    entry = case.header.splitlines()[-1].split("(")[0] + "("
    at = next(i for i, line in enumerate(lines) if line.startswith(entry)) + 1
    lines[at:at] = [case.indent + line for line in body.splitlines()]
    return "\n".join(lines)


def hostile(case: Case, body: str, where: str) -> str:
    """An answer whose code runs ``body`` at import ('before') or in the entry point ('inside'), then
    returns None. 'before' goes through exec() because evalplus's sanitize keeps only the statements
    the entry point depends on."""
    ind = case.indent
    if where == "before":
        code = f"_done = exec({body!r})\n{case.header}\n{ind}return _done\n"
    else:
        lines = "".join(f"{ind}{line}\n" for line in body.splitlines())
        code = f"{case.header}\n{lines}{ind}return None\n"
    return f"```python\n{code}```"


class Harness:
    """One env on one backend; it records the wall-clock limit each grading run gets."""

    def __init__(self, name: str, backend: str):
        self.case, self.backend = ENVS[name], backend
        self.env = gym.make(self.case.env_id, sandbox={"backend": backend}, **self.case.kwargs)
        self.sandbox = self.env.unwrapped.verifier.sandbox
        self.limits: list[float] = []
        self.containers_before: int | None = None
        run = self.sandbox.run

        def recording_run(program, **kw):
            self.limits.append((kw.get("limits") or self.sandbox.config.limits).timeout_s)
            return run(program, **kw)

        self.sandbox.run = recording_run

    def step(self, action):
        if self.backend == "docker":
            self.containers_before = self.settled_containers()
        self.env.reset(options={"task_id": self.case.task_id})
        t0 = time.monotonic()
        _, reward, terminated, truncated, info = self.env.step(action)
        return reward, terminated or truncated, info, time.monotonic() - t0

    def bound_s(self) -> float:
        return max(self.limits) + bound(SLACK_S)

    def settled_containers(self, wait_s: float = 30.0) -> int:
        """This sandbox's containers once the used one is removed and the warm pool refilled (both
        happen in the background after a run)."""
        filters = {"label": ["lopd.sandbox=1", f"lopd.sandbox.owner={self.sandbox.owner}"]}
        seen: list[int] = []  # the count at the moment it settled, not one read after

        def settled() -> bool:
            seen.append(len(self.sandbox.client.containers.list(all=True, filters=filters, ignore_removed=True)))
            return seen[-1] == self.sandbox.config.docker_pool_size

        wait_until(settled, wait_s, every=0.2)
        return seen[-1]

    def assert_nothing_left(self):
        if self.backend == "docker":
            assert self.settled_containers() == self.containers_before == self.sandbox.config.docker_pool_size
            return
        from test_sandbox_redteam import _leftovers  # our zygote's descendants, and escapees

        # a killed pid namespace takes a moment under load
        wait_until(lambda: not _leftovers(self.sandbox._proc.pid), 30, every=0.2)
        assert _leftovers(self.sandbox._proc.pid) == []

    def assert_still_grades(self):
        reward, done, info, _ = self.step(good_answer(self.case))
        assert reward == 1.0 and done, info.get("verdict")


@pytest.fixture(scope="module", params=[
    pytest.param((e, b), id=f"{e}-{b}", marks=DOCKER if b == "docker" else ())
    for e in ENVS for b in ("local", "docker")
])
def harness(request):
    name, backend = request.param
    if not has_data(ENVS[name].data):
        pytest.skip(f"{name} data not found; set LOPD_DATA_DIR")
    if backend == "docker":
        from envs.sandbox.docker_backend import docker_unavailable_reason

        if reason := docker_unavailable_reason():
            pytest.skip(f"docker sandbox unavailable: {reason}")
    h = Harness(name, backend)
    h.assert_still_grades()  # the baseline, and the run's wall-clock limit for the bounds
    yield h
    h.env.close()


@pytest.fixture
def confined(harness):
    """The harness, where hostile code is confined (it would run on this machine otherwise)."""
    if harness.backend == "local" and harness.sandbox.isolation == "none":
        pytest.skip("the local sandbox is not isolated here (not root): hostile code would hit this host")
    return harness


def assert_clear_failure(h: Harness, action, why: str | None = None) -> dict:
    reward, done, info, elapsed = h.step(action)
    verdict = info.get("verdict") or {}
    assert reward == 0.0 and done and verdict.get("pass") is False, verdict
    reason = verdict.get("reason")
    assert isinstance(reason, str) and reason.strip(), verdict
    if why is not None:
        assert why in reason.lower(), reason
    assert elapsed < h.bound_s(), (elapsed, h.bound_s(), verdict)
    h.assert_nothing_left()
    h.assert_still_grades()
    return verdict


# ---- answers that are not graded at all ----------------------------------------------------------
NOT_TEXT = {
    "none": None,
    "bytes": b"```python\ndef has_close_elements(numbers, threshold):\n    return False\n```",
    "int": 42,
    "dict": {"role": "assistant", "content": "```python\nprint(1)\n```"},
}


@pytest.mark.parametrize("action", NOT_TEXT.values(), ids=NOT_TEXT.keys())
def test_an_answer_that_is_not_text_is_refused_with_a_reason(harness, action):
    verdict = assert_clear_failure(harness, action, "must be text")
    assert type(action).__name__ in verdict["reason"]


@pytest.mark.parametrize("pad", ["comment", "literal"])
def test_a_megabyte_of_code_is_refused_with_a_reason(harness, pad):
    good = good_answer(harness.case)
    filler = "# " + "x" * MAX_TEXT if pad == "comment" else f"PAD = '{'x' * MAX_TEXT}'"
    assert_clear_failure(harness, good.replace("```python\n", f"```python\n{filler}\n", 1), "characters")


def test_code_just_under_the_size_bound_is_still_graded(harness):
    good = good_answer(harness.case)
    filler = "# " + "x" * (MAX_TEXT - len(good) - 20)
    reward, done, info, elapsed = harness.step(good.replace("```python\n", f"```python\n{filler}\n", 1))
    assert reward == 1.0 and done and elapsed < harness.bound_s(), (elapsed, info.get("verdict"))


@pytest.mark.parametrize("where", ["literal", "comment"])
def test_nul_bytes_in_the_code_fail_with_a_reason(harness, where):
    line = "nul = '\0'" if where == "literal" else "# \0"  # a real NUL character in the source
    assert_clear_failure(harness, at_entry(harness.case, good_answer(harness.case), line), "nul")


# ---- hostile code, run in the sandbox ------------------------------------------------------------
HOSTILE = {
    # the graders' guards set os.fork to None (as evalplus and lcb_runner do); posix.fork is still there
    "fork_bomb": "import os, posix\nfork = os.fork or posix.fork\nwhile True:\n    try:\n        fork()\n"
    "    except OSError:\n        pass\n",
    "stdout_10gb": "import sys\nfor _ in range(10_000):\n    sys.stdout.write('x' * (1 << 20))\n",
    "fd1_10gb": "import os\nfor _ in range(10_000):\n    os.write(1, b'x' * (1 << 20))\n",
    "close_sys_stdout": "import sys\nsys.stdout.close()\n",
    **{f"close_fd{fd}": f"import os\ntry:\n    os.close({fd})\nexcept OSError:\n    pass\n"
       for fd in (1, 0, 2)},
}
ENDLESS_AT_IMPORT = {("fork_bomb", "before"), ("stdout_10gb", "before")}
"""Not run: import-time code that runs until stopped makes evalplus's every phase run to its whole
budget (evalplus times each call, not the import: ~70 s for HumanEval/0), and the same code inside the
function is the same attack on the same defenses."""
CLOSE_ALL = (
    "import os, sys\nsys.stdout.close()\nfor fd in (0, 1, 2):\n    try:\n        os.close(fd)\n"
    "    except OSError:\n        pass\n"
)


@pytest.mark.parametrize("attack, where", [
    pytest.param(a, w, id=f"{a}-{w}") for a in HOSTILE for w in ("before", "inside")
    if (a, w) not in ENDLESS_AT_IMPORT
])
def test_hostile_code_fails_with_a_reason_and_leaves_nothing(confined, attack, where):
    assert_clear_failure(confined, hostile(confined.case, HOSTILE[attack], where))


def test_closed_stdio_does_not_hide_a_right_answer(confined):
    """The result travels on the grader's own channel, not on the stdio the solution can close."""
    answer = at_entry(confined.case, good_answer(confined.case), CLOSE_ALL)
    reward, done, info, elapsed = confined.step(answer)
    assert reward == 1.0 and done and elapsed < confined.bound_s(), info.get("verdict")
    confined.assert_nothing_left()
