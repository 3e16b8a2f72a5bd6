"""``ToolEnv``: the Gymnasium base class every tool-use environment builds on.

Observations and actions are text. ``reset`` picks a task (``options={"task_id": ...}`` or a
seeded draw from the split) and returns the user prompt; ``step(action_text)`` parses the
model's response, executes its tool calls against the episode's tools and returns their results
(or error text) as the next observation. The verifier's reward arrives when the episode ends.

A subclass says three things: which tasks exist, what state (with ``@tool`` methods) an
episode starts from, and how the final state is scored::

    class ShopEnv(ToolEnv):
        def load_tasks(self):          return [Task("t1", "Buy two apples.")]
        def setup(self, task):         return Shop()
        def verify(self, task, shop):  return checklist_reward([shop.cart == {"apple": 2}])

Per-env spec (class attributes, overridable per instance through keyword arguments):
``call_policy`` ("all" runs every call in order, as BFCL; "first" runs only the first, as
EnvScaler), ``max_steps`` (then truncated), ``end_on_no_call``, ``end_on_tool_error``.

What some subclasses override: ``parse`` (how a response is read), ``system_prompt``,
``select_task`` (which task ``reset`` plays) and ``begin_episode`` (the episode's tools, opening
messages, first observation and reset ``info``, from the state ``setup`` returned).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.protocol import ParsedResponse, parse_tool_calls, render_tools_system_prompt, wrap_tool_response
from envs.tools import ToolSet
from envs.trace import CallRecord, Step

CallPolicy = Literal["all", "first"]
MAX_TEXT = 1 << 20  # 1 MiB of characters: bigger actions are refused, never parsed
_SAMPLE_CHARSET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n\t{}[]():,.\"'<>/_-=\\"
)


class TextSpace(spaces.Text):
    """Any Python string up to ``max_length`` characters.

    Gymnasium's Text space restricts characters to a charset; model output and tool results are
    arbitrary Unicode, so membership only checks type and length. Sampling draws from a charset
    rich in JSON and tag punctuation, which makes random actions useful fuzz input.
    """

    def __init__(self, max_length: int = MAX_TEXT, seed: int | None = None):
        super().__init__(max_length=max_length, min_length=0, charset=_SAMPLE_CHARSET, seed=seed)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        length = int(self.np_random.integers(0, 200))
        return super().sample(mask=(length, None)) if mask is None else super().sample(mask=mask)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"


@dataclass(frozen=True)
class Task:
    """One task of an environment."""

    task_id: str
    """Unique within the environment."""
    prompt: str
    """The first user message."""
    split: str = "train"
    """'train' or 'eval' (or a benchmark's own split)."""
    system: str | None = None
    """System text placed before the tool list, if any."""
    data: dict[str, Any] = field(default_factory=dict)
    """Benchmark payload: ground truth, initial state, checklist, category."""


def checklist_reward(checks: Iterable[Callable[[], Any] | bool]) -> float:
    """Fraction of checks that hold. A check that raises or returns a non-bool counts as failed;
    an empty checklist scores 0.0."""
    results = []
    for c in checks:
        try:
            v = c() if callable(c) else c
        except Exception:
            v = False
        results.append(v is True or (isinstance(v, np.bool_) and bool(v)))
    return sum(results) / len(results) if results else 0.0


class ToolEnv(gym.Env[str, str]):
    """Base class of all tool-use environments. See the module docstring."""

    metadata = {"render_modes": ["ansi"], "render_fps": 1}
    call_policy: CallPolicy = "all"
    max_steps: int = 20
    end_on_no_call: bool = True
    """A response without any tool call is a final answer and ends the episode."""
    end_on_tool_error: bool = False
    """A tool that raises ends the episode with reward 0 (EnvScaler's runner)."""

    def __init__(self, tasks: Sequence[Task] | None = None, *, split: str | None = None,
                 max_steps: int | None = None, call_policy: CallPolicy | None = None,
                 render_mode: str | None = None):
        self._tasks = list(tasks) if tasks is not None else None
        self.split = split
        if max_steps is not None:
            self.max_steps = max_steps
        if call_policy is not None:
            self.call_policy = call_policy
        if self.max_steps < 1:
            raise ValueError("max_steps must be >= 1")
        self.render_mode = render_mode
        self.observation_space = TextSpace()
        self.action_space = TextSpace()
        self.task: Task | None = None
        self.state: Any = None
        self.tools: ToolSet = ToolSet()
        self.messages: list[dict[str, Any]] = []
        self.steps: list[Step] = []
        self.done = False
        self.final_reward = 0.0
        self.verify_error: str | None = None

    # ---- what a subclass provides -------------------------------------------------------
    def load_tasks(self) -> Sequence[Task]:
        """All tasks of this env (any split); called once, lazily."""
        raise NotImplementedError(f"{type(self).__name__} needs tasks=... or a load_tasks() override")

    def setup(self, task: Task) -> Any:
        """Fresh state for one episode. Its ``@tool`` methods become the tools; return a
        :class:`ToolSet` instead to choose them yourself."""
        raise NotImplementedError

    def verify(self, task: Task, state: Any) -> float:
        """The final reward of the episode, from the state ``setup`` returned."""
        raise NotImplementedError

    def parse(self, text: str) -> ParsedResponse:
        """Read the model's response. Hermes <tool_call> blocks by default."""
        return parse_tool_calls(text)

    def system_prompt(self, task: Task) -> str:
        return render_tools_system_prompt(self.tools.schemas, task.system)

    def select_task(self, seed: int | None, options: dict[str, Any]) -> Task:
        """The task ``reset`` plays: ``options["task_id"]`` (any split), else a draw from :attr:`tasks`
        with ``self.np_random``, which ``reset`` has already seeded with ``seed``."""
        if "task_id" in options:
            return self.task_by_id(str(options["task_id"]))
        pool = self.tasks
        if not pool:
            raise ValueError(f"{type(self).__name__} has no tasks in split {self.split!r}")
        return pool[int(self.np_random.integers(len(pool)))]

    def begin_episode(self, task: Task, state: Any) -> tuple[str, dict[str, Any]]:
        """Set the episode's tools and opening messages from the fresh ``state``; return the first
        observation and the reset ``info`` (``task_id``, ``split``, ``tools``, ``messages``)."""
        self.tools = state if isinstance(state, ToolSet) else ToolSet.from_object(state)
        self.messages = [{"role": "system", "content": self.system_prompt(task)},
                         {"role": "user", "content": task.prompt}]
        return task.prompt, {"task_id": task.task_id, "split": task.split, "tools": self.tools.schemas,
                             "messages": self.messages}

    # ---- Gymnasium API -------------------------------------------------------------------
    @property
    def tasks(self) -> list[Task]:
        """The tasks of ``split`` (every task when it is None): what ``reset`` draws from."""
        if self._tasks is None:
            self._tasks = list(self.load_tasks())
        if self.split is None:
            return self._tasks
        return [t for t in self._tasks if t.split == self.split]

    def all_tasks(self) -> list[Task]:
        """Every task of this env, train and eval, whatever ``split`` keeps (a new list)."""
        _ = self.tasks  # loads them, once
        return list(self._tasks or [])

    def task_by_id(self, task_id: str) -> Task:
        for t in self._tasks if self._tasks is not None else self.load_tasks():
            if t.task_id == task_id:
                return t
        raise KeyError(f"{type(self).__name__} has no task {task_id!r}")

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        self.task = self.select_task(seed, options or {})
        self.state = self.setup(self.task)
        observation, info = self.begin_episode(self.task, self.state)
        self.steps, self.done, self.final_reward, self.verify_error = [], False, 0.0, None
        return observation, copy.deepcopy(info)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            return "Error: the episode is over; call reset().", 0.0, True, False, {"error": "episode_over"}
        step = Step(index=len(self.steps), text=action if isinstance(action, str) else repr(action))
        if not isinstance(action, str) or len(action) > MAX_TEXT:
            parsed = ParsedResponse("", None, (), f"action must be a string of at most {MAX_TEXT} characters")
        else:
            parsed = self.parse(action)
        step.parse_error = parsed.error
        new_messages: list[dict[str, Any]] = [{"role": "assistant", "content": step.text}]
        terminated = raised = False
        if not parsed.calls and parsed.error is None:
            terminated = self.end_on_no_call
            observation = "" if terminated else "Error: no tool call found in the response."
        else:
            observation, raised = self._run_calls(parsed, step, new_messages)
            terminated = raised and self.end_on_tool_error
        self.steps.append(step)
        truncated = not terminated and len(self.steps) >= self.max_steps
        reward = 0.0
        if terminated or truncated:
            self.done = True
            reward = 0.0 if raised and self.end_on_tool_error else self._safe_verify()
            self.final_reward = reward
        step.observation, step.reward = observation, reward
        step.terminated, step.truncated = terminated, truncated
        self.messages.extend(new_messages)
        info = {"step": step, "messages": new_messages}
        if self.done:
            info.update(final_reward=self.final_reward, verify_error=self.verify_error)
        return observation, reward, terminated, truncated, copy.deepcopy(info)

    def _run_calls(self, parsed: ParsedResponse, step: Step, messages: list[dict[str, Any]]) -> tuple[str, bool]:
        """Execute per the call policy; record every call; return (observation, a tool raised)."""
        step.calls = [CallRecord(c.name, c.arguments, c.error) for c in parsed.calls]
        todo = step.calls[:1] if self.call_policy == "first" else step.calls
        replies: list[tuple[str, str]] = []
        if parsed.error and not todo:  # e.g. a stray </tool_call>: nothing to run
            replies.append(("", f"Error: could not parse the tool call ({parsed.error})."))
        raised = False
        for rec in todo:
            if rec.parse_error is not None:
                rec.result = f"Error: could not parse the tool call ({rec.parse_error})."
            else:
                result = self.tools.call(rec.name, rec.arguments)
                rec.executed, rec.result = True, result.content
                rec.error = result.content if result.error else None
                raised = raised or result.error == "tool_raised"
            replies.append((rec.name or "", rec.result))
            if raised and self.end_on_tool_error:
                break
        messages.extend({"role": "tool", "name": n, "content": t} for n, t in replies)
        return "\n".join(wrap_tool_response(t) for _, t in replies), raised

    def _safe_verify(self) -> float:
        # A broken verifier scores 0 rather than killing a training run; the reason is kept.
        try:
            r = float(self.verify(self.task, self.state))
        except Exception as e:
            self.verify_error = f"{type(e).__name__}: {e}"
            return 0.0
        if not np.isfinite(r):
            self.verify_error = f"verifier returned {r}"
            return 0.0
        return r

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n\n".join(f"[{m['role']}] {m['content']}" for m in self.messages)
