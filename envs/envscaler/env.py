"""``EnvScalerEnv``: EnvScaler scenarios as Gymnasium tool-use environments, with the authors' rules.

One episode = one scenario. ``reset`` execs the scenario's environment class into a fresh module,
applies ``init_config``, and shows the task; the system prompt is the authors' non-conversational
prompt plus the environment introduction and the tools in Qwen's ``<tools></tools>`` block.
Each ``step`` reads ONE action from the response (:mod:`envs.envscaler.parse`):

- a tool call runs the env method (only the first call of a response runs); its result comes back
  as ``<tool_response>\\n{str(result)}\\n</tool_response>``;
- a response without a tool call is ``chat_with_user``: the episode ends and is scored;
- a parse error, or a name that is not an attribute of the instance, returns the authors' error
  text and the episode goes on;
- a tool that raises ends the episode with reward 0;
- ``max_steps`` responses without an end truncate the episode with reward 0, as the authors'
  runner does (``reward_on_truncation=True`` scores the state instead).

Reward = fraction of the scenario's check functions that return True on the final state
(:func:`envs.envscaler.runtime.score_checklist`).

>>> import envs, gymnasium as gym                         # doctest: +SKIP
>>> env = gym.make("lopd/envscaler-v0")                   # doctest: +SKIP
>>> prompt, info = env.reset(options={"task_id": "env_183_rl-task_29"})  # doctest: +SKIP
"""

from __future__ import annotations

import copy
import functools
import traceback
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from envs.core import MAX_TEXT, Task, ToolEnv
from envs.envscaler.parse import CHAT, PARSE_RESPONSE_ERROR, Action, parse_action
from envs.envscaler.records import load_envs, load_scenarios
from envs.envscaler.runtime import ChecklistScore, EnvClassError, new_instance, score_checklist, state_of
from envs.protocol import parse_tool_calls, render_tools_system_prompt, wrap_tool_response
from envs.tools import ToolSet
from envs.trace import CallRecord, Step

# The authors' system prompt for the non-conversational runner (EnvScaler, ROLL env manager).
AUTHORS_SYSTEM_PROMPT = (
    "You are a helpful assistant. When given a specific task, your goal is to complete it in an interactive "
    "environment by making step-by-step use of available tools. \n"
    "- Before completing the task, at each step, select a tool from the tool list and fill in all required "
    "parameters, making sure that the values are valid. Avoid making parallel tool calls in one step.\n"
    "- When you believe the task has been completed, respond only with 'Task Completed' to end the "
    "trajectory, without adding any other content or making any tool calls.\n"
    "- It is recommended to first call query tools to gather sufficient information, then use modification "
    "tools to complete the task. Adjust actions promptly based on the feedback from the environment, i.e., "
    "the tool results.\n"
)
INVALID_ACTION = "Error: Invalid action"
TASK_FINISHED = "Task finished"
PathsArg = str | Path | Sequence[str | Path] | None


def environment_introduction(env: dict[str, Any]) -> str:
    """The authors' environment introduction: brief introduction plus the constraint rules."""
    rules = "".join(f"- {r}\n" for r in env.get("constraints_rules") or [])
    return (
        f"# Environment Information\n\n## Brief Introduction:  \n{env.get('environment_introduction', '')}"
        f"\n\n## Environment Rules / Constraints:  \n{rules}"
    )


def authors_system_text(env: dict[str, Any]) -> str:
    """System text before the tool block, as the authors build it."""
    return (
        f"{AUTHORS_SYSTEM_PROMPT}\n\nThe following is an introduction to the current environment:\n"
        f"{environment_introduction(env)}"
    )


def _has(obj: Any, name: str) -> bool:
    try:
        return hasattr(obj, name)
    except Exception:  # a property that raises something other than AttributeError
        return False


def _missing_method(class_name: str, name: str, **_: Any) -> Any:
    raise AttributeError(f"'{class_name}' object has no attribute '{name}'")


class EnvScalerEnv(ToolEnv):
    """EnvScaler scenarios (see the module docstring).

    Args:
        envs: environment record file(s) or folder(s); default the staged ``envscaler_rl_envs.jsonl``.
        scenarios: scenario record file(s) or folder(s); default every staged scenario file.
        task_ids: keep only these scenarios (in this order).
        split: keep only scenarios whose ``split`` field (default ``default_split``) equals this.
        system: "authors" (default) for the authors' prompt, None for the tool block alone, or any text.
        reward_on_truncation: score the state when ``max_steps`` runs out (authors: reward 0).
        allow_unlisted_methods: like the authors' runner, run a name that is an attribute of the
            instance even if it is not among the record's tools; False makes it an invalid action.
    """

    call_policy = "first"
    max_steps = 30  # the LOPD authors' rollouts on EnvScaler; EnvScaler's own RL used 40
    end_on_no_call = True
    end_on_tool_error = True
    default_split = "train"

    def __init__(
        self,
        envs: PathsArg = None,
        scenarios: PathsArg = None,
        *,
        task_ids: Iterable[str] | None = None,
        split: str | None = None,
        system: str | None = "authors",
        reward_on_truncation: bool = False,
        allow_unlisted_methods: bool = True,
        max_steps: int | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(split=split, max_steps=max_steps, render_mode=render_mode)
        self._env_paths, self._scenario_paths = envs, scenarios
        self._task_ids = list(task_ids) if task_ids is not None else None
        self.system = system
        self.reward_on_truncation = reward_on_truncation
        self.allow_unlisted_methods = allow_unlisted_methods
        self.env_records: dict[str, dict[str, Any]] = {}
        self.skipped: dict[str, str] = {}
        """Scenarios that cannot run (their environment record is absent): task_id -> reason."""
        self.instance: Any = None
        self.init_state: dict[str, Any] = {}
        self.score: ChecklistScore | None = None
        self._by_id: dict[str, Task] | None = None

    # ---- records -> tasks ----------------------------------------------------------------
    def _paths(self) -> tuple[PathsArg, PathsArg]:
        """Where the records are; a subclass (the micro world) may build them first."""
        return self._env_paths, self._scenario_paths

    def load_tasks(self) -> list[Task]:
        env_paths, scenario_paths = self._paths()
        self.env_records = load_envs(env_paths)
        scenarios = load_scenarios(scenario_paths)
        if self._task_ids is not None:
            by_id = {s["task_id"]: s for s in scenarios}
            unknown = [t for t in self._task_ids if t not in by_id]
            if unknown:
                raise KeyError(f"no scenario(s) {', '.join(unknown)} in the records")
            scenarios = [by_id[t] for t in self._task_ids]
        tasks = []
        for s in scenarios:
            env = self.env_records.get(str(s["env_id"]))
            if env is None:
                self.skipped[s["task_id"]] = f"its environment {s['env_id']!r} is not in the env records"
                continue
            system = authors_system_text(env) if self.system == "authors" else self.system
            tasks.append(
                Task(
                    str(s["task_id"]),
                    str(s["task"]),
                    str(s.get("split", self.default_split)),
                    system,
                    {"scenario": s},
                )
            )
        if self.skipped:
            warnings.warn(
                f"{type(self).__name__}: skipped {len(self.skipped)} scenario(s) without an environment "
                f"record: {', '.join(sorted(self.skipped))}",
                stacklevel=2,
            )
        return tasks

    def task_by_id(self, task_id: str) -> Task:
        if self._by_id is None:  # loads (once) and indexes every task, whatever the split filter
            self._by_id = {t.task_id: t for t in self.all_tasks()}
        if task_id in self._by_id:
            return self._by_id[task_id]
        if task_id in self.skipped:
            raise KeyError(f"scenario {task_id!r} cannot run: {self.skipped[task_id]}")
        raise KeyError(f"{type(self).__name__} has no task {task_id!r}")

    # ---- one episode -------------------------------------------------------------------------
    def setup(self, task: Task) -> ToolSet:
        s = task.data["scenario"]
        env = self.env_records[str(s["env_id"])]
        class_name = s.get("env_class_name") or env.get("env_class_name")
        if not class_name:
            raise EnvClassError(f"env {s['env_id']}: neither the scenario nor the env record names the class")
        self.instance = new_instance(str(s["env_id"]), env["env_class_code"], class_name, s["init_config"])
        try:
            self.init_state = state_of(self.instance)
        except Exception as e:
            raise EnvClassError(f"env {s['env_id']}: the instance state cannot be copied ({e})") from e
        self.score = None
        # Schema-checking is off: the authors call the method with the arguments as given.
        tools = ToolSet(validate=False)
        for schema in env["tools"]:
            name = schema.get("function", schema).get("name")
            fn = getattr(self.instance, str(name), None)
            tools.add(fn if callable(fn) else functools.partial(_missing_method, class_name, name), schema)
        return tools

    def system_prompt(self, task: Task) -> str:
        if not self.tools.schemas:  # the authors add no tool block when there are no tools
            return task.system or ""
        return render_tools_system_prompt(self.tools.schemas, task.system)

    def verify(self, task: Task, state: Any) -> float:
        self.score = score_checklist(
            task.data["scenario"]["checklist_with_func"], self.init_state, state_of(self.instance)
        )
        return self.score.reward

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        try:
            prompt, info = super().reset(seed=seed, options=options)
        except Exception:
            # A broken env class must not leave the previous episode steppable under the new task.
            self.instance, self.done = None, True
            raise
        info["env_id"] = self.task.data["scenario"]["env_id"]
        return prompt, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            return "Error: the episode is over; call reset().", 0.0, True, False, {"error": "episode_over"}
        text = action if isinstance(action, str) else repr(action)
        step = Step(index=len(self.steps), text=text)
        if isinstance(action, str) and len(action) <= MAX_TEXT:
            parsed = parse_action(action)
            step.calls = [CallRecord(c.name, c.arguments, c.error) for c in parse_tool_calls(text).calls]
        else:  # not text, or over the size bound every env shares: refused unparsed
            parsed = Action(None, None, PARSE_RESPONSE_ERROR)
        step.parse_error = parsed.error
        new_messages: list[dict[str, Any]] = [{"role": "assistant", "content": text}]
        terminated = scored = False
        if parsed.error is not None:
            observation, kind = parsed.error, "user"
        elif not self._valid(parsed):
            observation, kind = INVALID_ACTION, "user"
        elif parsed.name == CHAT:
            observation, kind, terminated, scored = TASK_FINISHED, "user", True, True
        else:
            observation, kind, terminated = self._execute(parsed, step)
        self.steps.append(step)
        truncated = not terminated and len(self.steps) >= self.max_steps
        reward = 0.0
        if terminated or truncated:
            self.done = True
            if scored or (truncated and self.reward_on_truncation):
                reward = self._safe_verify()
            self.final_reward = reward
        elif kind == "tool":
            new_messages.append({"role": "tool", "name": str(parsed.name), "content": observation})
        else:
            new_messages.append({"role": "user", "content": observation})
        if kind == "tool":
            observation = wrap_tool_response(observation)
        step.observation, step.reward = observation, reward
        step.terminated, step.truncated = terminated, truncated
        self.messages.extend(new_messages)
        info: dict[str, Any] = {"step": step, "messages": new_messages}
        if self.done:
            info.update(
                final_reward=self.final_reward,
                verify_error=self.verify_error,
                checks=[vars(r) for r in self.score.results] if self.score else [],
            )
        return observation, reward, terminated, truncated, copy.deepcopy(info)

    def _valid(self, a: Action) -> bool:
        """The authors' check_vaild_action (plus: a non-string name is invalid, not a crash)."""
        if not a.name or not isinstance(a.name, str):
            return False
        if a.name != CHAT and not _has(self.instance, a.name):
            return False
        if a.name != CHAT and not self.allow_unlisted_methods and a.name not in self.tools:
            return False
        return isinstance(a.arguments, dict) and (a.name != CHAT or "content" in a.arguments)

    def _execute(self, a: Action, step: Step) -> tuple[str, str, bool]:
        """Run the method; returns (observation text, "tool" or "user", episode ended)."""
        rec = next((c for c in step.calls if c.name == a.name and c.arguments == a.arguments), None)
        if rec is None:  # the authors' parse found a call ours did not split out the same way
            rec = CallRecord(a.name, a.arguments)
            step.calls.append(rec)
        rec.executed = True
        try:
            result = f"{getattr(self.instance, a.name)(**a.arguments)}"
        except BaseException as e:  # noqa: BLE001 - env code may exit(); the episode ends, we go on
            if isinstance(e, KeyboardInterrupt):
                raise
            rec.error = rec.result = "Error: <Exception>\n" + traceback.format_exc(limit=-8)
            return rec.result, "user", True
        rec.result = result
        return result, "tool", False


class EnvScalerFixtureEnv(EnvScalerEnv):
    """The two smolqwen fixture scenarios (``smolqwen_fixture_scenarios.jsonl``) over the staged envs."""

    def _paths(self) -> tuple[PathsArg, PathsArg]:
        from envs.data import require_data
        from envs.envscaler.records import STAGED_FIXTURE_SCENARIOS

        scenarios = self._scenario_paths or [require_data("envscaler", n) for n in STAGED_FIXTURE_SCENARIOS]
        return self._env_paths, scenarios
