"""``CodeEnv``: the single-turn base of the coding environments (EvalPlus, LiveCodeBench).

The observation is the problem; the action is the model's whole response (reasoning in ``<think>``
is dropped, code is extracted by the benchmark's own rule); the episode ends after that one step
with reward = the verdict (1.0 pass, 0.0 fail). No tools: the response is never parsed for tool
calls. The verdict's details arrive in ``info["verdict"]`` of the final step; a failed one says why
in ``verdict["reason"]``. As in every env, an action that is not a string or is longer than
``MAX_TEXT`` is refused unread (reward 0, the reason in the verdict) rather than raising. Usage::

    env = gymnasium.make("lopd/evalplus-humaneval-v0")
    prompt, info = env.reset(options={"task_id": "HumanEval/0"})
    _, reward, terminated, _, info = env.step("```python\\ndef has_close_elements(...): ...\\n```")
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from envs.core import MAX_TEXT, ToolEnv
from envs.protocol import ParsedResponse, split_reasoning
from envs.sandbox.config import SandboxConfig, sandbox_config
from envs.sandbox.grading import Mode, SandboxGrader, check_mode
from envs.tools import ToolSet

SYSTEM = "You are an expert Python programmer."
VerifierT = TypeVar("VerifierT", bound=SandboxGrader)


def refusal(action: Any) -> str | None:
    """Why ``action`` is not graded at all (None when it is graded)."""
    if not isinstance(action, str):
        return f"the answer must be text (str), got {type(action).__name__}: not graded"
    if len(action) > MAX_TEXT:
        return f"the answer has {len(action)} characters, more than the {MAX_TEXT} accepted: not graded"
    return None


class CodeEnv(ToolEnv, Generic[VerifierT]):
    """Subclasses implement ``load_tasks``, ``make_verifier``, ``grade(task, answer) -> (reward,
    verdict dict)`` and ``refused(task, reason) -> verdict dict`` (a fail in the benchmark's verdict
    shape). ``mode`` is the verdict mode ('strict' or 'official'), ``sandbox`` the sandbox config (or
    its mapping)."""

    max_steps = 1
    end_on_no_call = True

    def __init__(
        self, *args: Any, mode: Mode = "strict", sandbox: SandboxConfig | dict | None = None, **kwargs: Any
    ):
        super().__init__(*args, **kwargs)
        check_mode(mode)
        self.mode = mode
        self.sandbox_config = sandbox_config(sandbox)
        self._verifier: VerifierT | None = None
        self.last_verdict: dict[str, Any] | None = None
        self._refusal: str | None = None

    @property
    def verifier(self) -> VerifierT:
        """The benchmark's verifier, made at the first grading: an env never stepped starts no sandbox."""
        if self._verifier is None:
            self._verifier = self.make_verifier()
        return self._verifier

    def make_verifier(self) -> VerifierT:
        raise NotImplementedError

    def grade(self, task, answer: str) -> tuple[float, dict[str, Any]]:
        raise NotImplementedError

    def refused(self, task, reason: str) -> dict[str, Any]:
        return {"task_id": task.task_id, "pass": False, "reason": reason}

    def setup(self, task) -> ToolSet:
        return ToolSet()

    def parse(self, text: str) -> ParsedResponse:
        reasoning, rest = split_reasoning(text)
        return ParsedResponse(rest, reasoning)

    def system_prompt(self, task) -> str:
        return task.system or SYSTEM

    def verify(self, task, state) -> float:
        if self._refusal is not None:  # the base class recorded repr(action): never grade that
            self.last_verdict = self.refused(task, self._refusal)
            return 0.0
        text = self.steps[-1].text if self.steps else ""
        _, answer = split_reasoning(text)
        reward, self.last_verdict = self.grade(task, answer)
        return reward

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.last_verdict = None
        return super().reset(seed=seed, options=options)

    def step(self, action: str):
        self._refusal = refusal(action)
        obs, reward, terminated, truncated, info = super().step(action)
        if self.done and self.last_verdict is not None and "verdict" not in info:
            info["verdict"] = dict(self.last_verdict)
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        if self._verifier is not None:
            self._verifier.close()
            self._verifier = None
        super().close()
