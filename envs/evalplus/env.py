"""EvalPlus environments: HumanEval+ and MBPP+ as single-turn coding tasks.

The prompt is evalplus's own chat instruction around the task prompt; the response's code is taken
out by evalplus's ``sanitize`` (as its codegen does) and graded by :class:`EvalPlusVerifier` in the
configured sandbox. Reward 1.0 iff base and plus tests pass. ``mode='strict'`` (default, for training)
rejects faked passes; ``mode='official'`` reproduces evalplus 0.3.1 exactly::

    import gymnasium as gym, envs
    env = gym.make("lopd/evalplus-mbpp-v0", mode="official", sandbox={"backend": "docker"})
"""

from __future__ import annotations

import ast
from typing import Any

from envs.core import Task
from envs.evalplus.data import Dataset, load_problems
from envs.evalplus.verifier import EvalPlusVerifier, Mode, Verdict
from envs.sandbox.codeenv import CodeEnv
from envs.sandbox.config import SandboxConfig

# evalplus 0.3.1 codegen's instruction for chat models (evalplus/codegen.py)
INSTRUCTION = (
    "Please provide a self-contained Python script that solves the following problem in a "
    "markdown code block:"
)


def task_prompt(problem_prompt: str) -> str:
    return f"{INSTRUCTION}\n```\n{problem_prompt.strip()}\n```\n"


def fail_reason(v: Verdict, code: str, answer: str, entry_point: str) -> str:
    """Words for a failed verdict: evalplus itself only gives statuses."""
    if v.error:
        return v.error
    nul = "; the answer holds NUL bytes, which Python source cannot" if "\0" in answer else ""
    try:
        tree = compile(code, "<solution>", "exec", ast.PyCF_ONLY_AST)
        compile(tree, "<solution>", "exec")
    except Exception as e:  # the verifier failed it before running anything
        return f"the code does not compile: {type(e).__name__}: {e}{nul}"
    if entry_point not in defined_names(tree):
        return f"the extracted code does not define {entry_point}{nul}"
    return f"tests failed: base {v.base_status or 'not run'}, plus {v.plus_status or 'not run'}{nul}"


def defined_names(tree: ast.Module) -> set[str]:
    """Every name the code defines anywhere (over-inclusive: it only chooses the reason's words)."""
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, ast.alias):
            names.add((n.asname or n.name).split(".")[0])
    return names


class EvalPlusEnv(CodeEnv[EvalPlusVerifier]):
    """One EvalPlus dataset; tasks are in split 'test'."""

    def __init__(
        self,
        dataset: Dataset = "humaneval",
        mode: Mode = "strict",
        sandbox: SandboxConfig | dict | None = None,
        **kwargs: Any,
    ):
        super().__init__(mode=mode, sandbox=sandbox, **kwargs)
        self.dataset = dataset

    def make_verifier(self) -> EvalPlusVerifier:
        return EvalPlusVerifier(self.dataset, mode=self.mode, sandbox_config=self.sandbox_config)

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
        if not v.passed:
            verdict["reason"] = fail_reason(v, code, answer, task.data["entry_point"])
        return (1.0 if v.passed else 0.0), verdict

    def refused(self, task: Task, reason: str) -> dict[str, Any]:
        return {**Verdict(task.task_id, False, None, None).to_json(), "mode": self.mode, "reason": reason}
