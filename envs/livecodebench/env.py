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
from envs.livecodebench.verifier import LCBVerifier, Mode, extract_code
from envs.sandbox.codeenv import CodeEnv
from envs.sandbox.config import SandboxConfig, sandbox_config

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


class LiveCodeBenchEnv(CodeEnv):
    """Problems from ``source`` (default: the staged public-test file), split 'test'."""

    def __init__(
        self,
        source: str | None = None,
        release: str | None = None,
        start_date: str | datetime | None = None,
        end_date: str | datetime | None = None,
        mode: Mode = "strict",
        sandbox: SandboxConfig | dict | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if mode not in ("official", "strict"):
            raise ValueError(f"mode must be 'official' or 'strict', got {mode!r}")
        self.source, self.release, self.start_date, self.end_date = source, release, start_date, end_date
        self.mode = mode
        self.sandbox_config = sandbox_config(sandbox)
        self._verifier: LCBVerifier | None = None

    @property
    def verifier(self) -> LCBVerifier:
        if self._verifier is None:
            self._verifier = LCBVerifier(mode=self.mode, sandbox_config=self.sandbox_config)
        return self._verifier

    def load_tasks(self) -> list[Task]:
        probs = load_problems(self.source, self.release, self.start_date, self.end_date)
        return [
            Task(p.question_id, question_prompt(p), split="test", system=SYSTEM_MESSAGE, data={"problem": p})
            for p in probs
        ]

    def grade(self, task: Task, answer: str) -> tuple[float, dict[str, Any]]:
        problem: Problem = task.data["problem"]
        v = self.verifier.check(problem, extract_code(answer))
        verdict = v.to_json()
        verdict["mode"] = self.mode
        if problem.public_only:
            verdict["note"] = PUBLIC_ONLY_NOTE
        return (1.0 if v.passed else 0.0), verdict

    def close(self) -> None:
        if self._verifier is not None:
            self._verifier.close()
            self._verifier = None
        super().close()
