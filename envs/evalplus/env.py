"""EvalPlus environments: HumanEval+ and MBPP+ as single-turn coding tasks.

The prompt is evalplus's own chat instruction around the task prompt; the response's code is taken
out by evalplus's ``sanitize`` (as its codegen does) and graded by :class:`EvalPlusVerifier` in the
configured sandbox. Reward 1.0 iff base and plus tests pass. ``mode='strict'`` (default, for training)
rejects faked passes; ``mode='official'`` reproduces evalplus 0.3.1 exactly::

    import gymnasium as gym, envs
    env = gym.make("lopd/evalplus-mbpp-v0", mode="official", sandbox={"backend": "docker"})
"""

from __future__ import annotations

from typing import Any

from envs.core import Task
from envs.evalplus.data import Dataset, load_problems
from envs.evalplus.verifier import EvalPlusVerifier, Mode
from envs.sandbox.codeenv import CodeEnv
from envs.sandbox.config import SandboxConfig, sandbox_config

# evalplus 0.3.1 codegen's instruction for chat models (evalplus/codegen.py)
INSTRUCTION = (
    "Please provide a self-contained Python script that solves the following problem in a "
    "markdown code block:"
)


def task_prompt(problem_prompt: str) -> str:
    return f"{INSTRUCTION}\n```\n{problem_prompt.strip()}\n```\n"


class EvalPlusEnv(CodeEnv):
    """One EvalPlus dataset; tasks are in split 'test'."""

    def __init__(
        self,
        dataset: Dataset = "humaneval",
        mode: Mode = "strict",
        sandbox: SandboxConfig | dict | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if mode not in ("official", "strict"):
            raise ValueError(f"mode must be 'official' or 'strict', got {mode!r}")
        self.dataset, self.mode = dataset, mode
        self.sandbox_config = sandbox_config(sandbox)
        self._verifier: EvalPlusVerifier | None = None

    @property
    def verifier(self) -> EvalPlusVerifier:
        if self._verifier is None:
            self._verifier = EvalPlusVerifier(
                self.dataset, mode=self.mode, sandbox_config=self.sandbox_config
            )
        return self._verifier

    def load_tasks(self) -> list[Task]:
        return [
            Task(tid, task_prompt(p["prompt"]), split="test", data={"entry_point": p["entry_point"]})
            for tid, p in load_problems(self.dataset).items()
        ]

    def grade(self, task: Task, answer: str) -> tuple[float, dict[str, Any]]:
        from evalplus.sanitize import sanitize

        try:
            code = sanitize(answer, task.data["entry_point"])
        except Exception:  # tree-sitter on hostile text: grade the raw answer instead
            code = answer
        v = self.verifier.check(task.task_id, code)
        verdict = v.to_json()
        verdict["mode"] = self.mode
        return (1.0 if v.passed else 0.0), verdict

    def close(self) -> None:
        if self._verifier is not None:
            self._verifier.close()
            self._verifier = None
        super().close()
