"""LiveCodeBench code generation as a single-turn coding environment.

The prompt is lcb_runner's generic chat format (its system message and ``### Question`` /
``### Format`` / ``### Answer`` template); the code is the response's last fenced block; reward 1.0
iff every test passes (lcb_runner's rules, 6 s per test). On the staged public-test file the reward
is a public-test score, NOT a LiveCodeBench result (``info["verdict"]["note"]`` says so)::

    env = gymnasium.make("lopd/livecodebench-v0", source="/data/lcb", release="release_v5",
                         start_date="2024-08-01", mode="official")
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from envs.core import Task
from envs.livecodebench.data import PUBLIC_ONLY_NOTE, Problem, load_problems
from envs.livecodebench.verifier import TIMEOUT_S, LCBVerdict, LCBVerifier, Mode, extract_code
from envs.sandbox.codeenv import CodeEnv
from envs.sandbox.config import SandboxConfig

SYSTEM_MESSAGE = (
    "You are an expert Python programmer. You will be given a question (problem specification) and "
    "will generate a correct Python program that matches the specification and passes all tests. "
    "You will NOT return anything except for the program."
)
WITH_STARTER = (
    "You will use the following starter code to write the solution to the problem and enclose your "
    "code within delimiters."
)
WITHOUT_STARTER = (
    "Read the inputs from stdin solve the problem and write the answer to stdout (do not directly "
    "test on the sample inputs). Enclose your code within delimiters as follows."
)


def question_prompt(p: Problem) -> str:
    """lcb_runner's generic chat question template."""
    prompt = f"### Question:\n{p.question_content}\n\n"
    if p.starter_code:
        prompt += f"### Format: {WITH_STARTER}\n```python\n{p.starter_code}\n```\n\n"
    else:
        prompt += f"### Format: {WITHOUT_STARTER}\n```python\n# YOUR CODE HERE\n```\n\n"
    return prompt + "### Answer: (use the provided format with backticks)\n\n"


def fail_reason(v: LCBVerdict) -> str:
    """Words for a failed verdict, from lcb_runner's metadata."""
    if v.error:
        return v.error
    if v.global_timeout:
        return "no result within the global time limit (lcb_runner's TestRunnerError)"
    msg, detail = str(v.metadata.get("error_message") or ""), v.metadata.get("error")
    if msg.endswith(": "):  # lcb's f"Error during testing: {e}" of an exception without a message
        msg += "an exception without a message (lcb_runner's time limit raises one)"
    if msg:
        return f"{msg}: {detail}" if detail else msg
    return f"tests failed: results {v.results}"


class LiveCodeBenchEnv(CodeEnv[LCBVerifier]):
    """Problems from ``source`` (default: the staged public-test file), split 'test'. ``timeout``: the
    seconds per test (lcb_runner's 6; smaller only for quick tests)."""

    def __init__(
        self,
        source: str | None = None,
        release: str | None = None,
        start_date: str | datetime | None = None,
        end_date: str | datetime | None = None,
        mode: Mode = "strict",
        sandbox: SandboxConfig | dict | None = None,
        timeout: int = TIMEOUT_S,
        **kwargs: Any,
    ):
        super().__init__(mode=mode, sandbox=sandbox, **kwargs)
        self.source, self.release, self.start_date, self.end_date = source, release, start_date, end_date
        self.timeout = int(timeout)

    def make_verifier(self) -> LCBVerifier:
        return LCBVerifier(mode=self.mode, sandbox_config=self.sandbox_config, timeout=self.timeout)

    def load_tasks(self) -> list[Task]:
        probs = load_problems(self.source, self.release, self.start_date, self.end_date)
        return [
            Task(p.question_id, question_prompt(p), split="test", system=SYSTEM_MESSAGE, data={"problem": p})
            for p in probs
        ]

    def grade(self, task: Task, answer: str) -> tuple[float, dict[str, Any]]:
        problem: Problem = task.data["problem"]
        v = self.verifier.check(problem, extract_code(answer))
        verdict = self._finish(v.to_json(), problem)
        if not v.passed:
            verdict["reason"] = fail_reason(v)
        return (1.0 if v.passed else 0.0), verdict

    def refused(self, task: Task, reason: str) -> dict[str, Any]:
        problem: Problem = task.data["problem"]
        return {**self._finish(LCBVerdict(problem.question_id, []).to_json(), problem), "reason": reason}

    def _finish(self, verdict: dict[str, Any], problem: Problem) -> dict[str, Any]:
        verdict["mode"] = self.mode
        if problem.public_only:
            verdict["note"] = PUBLIC_ONLY_NOTE
        return verdict
