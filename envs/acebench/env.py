"""ACEBench as Gymnasium environments: normal, special and agent, in English or Chinese.

::

    import gymnasium as gym, envs
    env = gym.make("lopd/acebench-normal-en-v0", categories=["normal_atom_bool"], format="prompt")
    prompt, info = env.reset(options={"task_id": "normal_atom_bool_0"})
    obs, reward, terminated, truncated, info = env.step("[some_api(flag=True)]")

Normal and special entries are one-step episodes: the reward is ACEBench's verdict on the
response (1.0 or 0.0) and ``info["verdict"]`` holds ``{id, category, valid, error_type, error}``.
``format="prompt"`` expects ``[Api(k='v')]`` text (decoded after ACEBench's remove-all-whitespace
step); ``format="fc"`` gives the APIs as tools in the system prompt and reads Hermes
``<tool_call>`` blocks, which are rendered to the prompt string and checked by the same rules.
A leading ``<think>...</think>`` block is dropped before checking in both formats.

Agent entries are multi-message episodes over our scenario classes. Each ``step`` is one agent
message. ``agent_multi_step``: every message goes to the execution role (an undecodable one gets
ACEBench's fixed reply). ``agent_multi_turn``: a message holding ``[...]`` that decodes goes to
execution, anything else to the user simulator (``user_simulator=`` any object with
``start``/``respond``, or ``user_generate=`` a ``generate(messages) -> str`` callable; the default
is a deterministic :class:`~envs.acebench.user_sim.ScriptedUserSimulator`). Episodes end when a
message after the second contains "finish conversation" or after 40 messages (truncated). The
reward is the end-to-end verdict; ``info["process_accuracy"]`` the process share.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from envs.acebench import prompts
from envs.acebench.data import Entry, load_family
from envs.acebench.executor import AgentRuntime, Execution, decode_execution_message, is_execution_request
from envs.acebench.scoring import Verdict, verdict_agent, verdict_normal, verdict_special
from envs.acebench.user_sim import EngineUserSimulator, ScriptedUserSimulator, UserSimulator
from envs.core import MAX_TEXT, Task, ToolEnv
from envs.protocol import parse_tool_calls, render_tools_system_prompt, split_reasoning
from envs.pythonic import render_pythonic_calls
from envs.tools import ToolSet
from envs.trace import CallRecord, Step

FORMATS = ("prompt", "fc")


def tool_schema(doc: dict[str, Any]) -> dict[str, Any]:
    """An ACEBench function doc as an OpenAI tool schema (``arguments`` docs and ``dict`` types mapped)."""
    params = doc.get("parameters") or doc.get("arguments") or doc.get("_arguments") or {}
    params = copy.deepcopy(params) if isinstance(params, dict) else {}
    if params.get("type") in (None, "dict"):
        params["type"] = "object"
    params.setdefault("properties", {})
    return {
        "type": "function",
        "function": {
            "name": str(doc.get("name", "")),
            "description": str(doc.get("description", "")),
            "parameters": params,
        },
    }


def _not_executable(**_: Any) -> str:
    raise RuntimeError("ACEBench normal/special tools are checked, not executed")


def schema_toolset(functions: Sequence[dict[str, Any]]) -> ToolSet:
    """A ToolSet that only carries the schemas (for ``info['tools']`` and FC prompts)."""
    tools = ToolSet()
    for doc in functions:
        if isinstance(doc, dict) and doc.get("name"):
            tools.add(_not_executable, tool_schema(doc))
    return tools


def _visible_text(action: Any) -> str:
    """The response without a leading ``<think>`` block (untouched when there is none)."""
    text = (action if isinstance(action, str) else repr(action))[:MAX_TEXT]
    reasoning, rest = split_reasoning(text)
    return text if reasoning is None else rest.strip()


class _AceBenchEnv(ToolEnv):
    family = ""

    def __init__(
        self,
        language: str = "en",
        categories: Sequence[str] | None = None,
        format: str = "prompt",
        *,
        entries: Sequence[Entry] | None = None,
        split: str | None = None,
        max_steps: int | None = None,
        render_mode: str | None = None,
    ):
        if format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
        if language not in ("en", "zh"):
            raise ValueError(f"language must be 'en' or 'zh', got {language!r}")
        self.language, self.format = language, format
        self.categories = tuple(categories) if categories is not None else None
        self._given_entries = list(entries) if entries is not None else None
        super().__init__(split=split, max_steps=max_steps, render_mode=render_mode)

    def load_tasks(self) -> list[Task]:
        entries = self._given_entries
        if entries is None:
            entries = load_family(self.language, self.family, self.categories)
        return [self._task(e) for e in entries]

    def _task(self, entry: Entry) -> Task:
        return Task(
            entry.id,
            prompts.single_turn_user(entry.question, entry.language),
            split="eval",
            data={"entry": entry, "category": entry.category},
        )

    def entry(self) -> Entry:
        assert self.task is not None
        return self.task.data["entry"]

    def setup(self, task: Task) -> ToolSet:
        return schema_toolset(task.data["entry"].functions)

    def system_prompt(self, task: Task) -> str:
        e = task.data["entry"]
        fc = self.format == "fc"
        text = prompts.single_turn_system(self.family, e.language, e.functions, e.time, e.profile, fc=fc)
        return render_tools_system_prompt(self.tools.schemas, text) if fc else text

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            return "Error: the episode is over; call reset().", 0.0, True, False, {"error": "episode_over"}
        return self._step(action)

    def _step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        """One step of an episode that has started and not ended."""
        raise NotImplementedError


class _SingleTurnEnv(_AceBenchEnv):
    """One response, one verdict."""

    max_steps = 1
    unreadable_error = ""
    """The error_type of a response that is not a string of at most MAX_TEXT characters."""

    def _verdict(self, entry: Entry, action: Any) -> tuple[Verdict, Step]:
        step = Step(index=0, text=action if isinstance(action, str) else repr(action))
        if not isinstance(action, str) or len(action) > MAX_TEXT:
            error = f"the response must be a string of at most {MAX_TEXT} characters"
            return Verdict(entry.id, entry.category, False, self.unreadable_error, [error]), step
        return self._check(entry, action, step), step

    def _check(self, entry: Entry, action: str, step: Step) -> Verdict:
        """The verdict on a readable response; may record what it parsed on ``step``."""
        raise NotImplementedError

    def _step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        verdict, step = self._verdict(self.entry(), action)
        reward = 1.0 if verdict.valid else 0.0
        step.reward, step.terminated = reward, True
        self.steps.append(step)
        self.done, self.final_reward = True, reward
        new = [{"role": "assistant", "content": step.text}]
        self.messages.extend(new)
        info = {
            "step": step,
            "messages": new,
            "final_reward": reward,
            "verify_error": None,
            "verdict": verdict.row(),
        }
        return "", reward, True, False, copy.deepcopy(info)

    def verify(self, task: Task, state: Any) -> float:
        return self.final_reward


class AceBenchNormalEnv(_SingleTurnEnv):
    """ACEBench normal categories (single/parallel function, multi-turn prefixes, similar API,
    preference, atom_*). Reward: ACEBench's normal verdict on the one response."""

    family = "normal"
    unreadable_error = "wrong_output_format"

    def _check(self, entry: Entry, action: str, step: Step) -> Verdict:
        if self.format != "fc":
            return verdict_normal(entry, _visible_text(action))
        parsed = parse_tool_calls(action)
        step.parse_error = parsed.error
        step.calls = [CallRecord(c.name, c.arguments, c.error) for c in parsed.calls]
        if not parsed.calls:
            return verdict_normal(entry, parsed.content)
        if parsed.error or any(not c.ok for c in parsed.calls):
            return Verdict(entry.id, entry.category, False, "wrong_output_format", [e for e in parsed.errors])
        return verdict_normal(entry, [{c.name: c.arguments} for c in parsed.calls], fc=True)


class AceBenchSpecialEnv(_SingleTurnEnv):
    """ACEBench special categories (incomplete, error_param, irrelevant): the response must say
    what is wrong with ACEBench's fixed phrases."""

    family = "special"
    unreadable_error = "error_detection"

    def _check(self, entry: Entry, action: str, step: Step) -> Verdict:
        return verdict_special(entry, _visible_text(action))


class AceBenchAgentEnv(_AceBenchEnv):
    """ACEBench agent categories (multi_step, multi_turn) over our scenario classes."""

    family = "agent"
    max_steps = 40
    max_messages = 40

    def __init__(
        self,
        language: str = "en",
        categories: Sequence[str] | None = None,
        format: str = "prompt",
        *,
        user_simulator: Any = None,
        user_generate: Any = None,
        **kwargs: Any,
    ):
        super().__init__(language, categories, format, **kwargs)
        if user_simulator is not None and user_generate is not None:
            raise ValueError("give user_simulator or user_generate, not both")
        if user_generate is not None:
            user_simulator = EngineUserSimulator(user_generate)
        if (
            user_simulator is not None
            and not callable(user_simulator)
            and not isinstance(user_simulator, UserSimulator)
        ):
            raise TypeError("user_simulator must have start()/respond() or be a factory entry -> simulator")
        self._user_spec = user_simulator
        self.user: UserSimulator | None = None
        self.runtime: AgentRuntime | None = None
        self.process: list[str] = []
        self._n_messages = 0

    def _task(self, entry: Entry) -> Task:
        return Task(entry.id, entry.question, split="eval", data={"entry": entry, "category": entry.category})

    @property
    def mode(self) -> str:
        return "multi_turn" if self.entry().category.endswith("multi_turn") else "multi_step"

    def system_prompt(self, task: Task) -> str:
        e = task.data["entry"]
        mode = "multi_turn" if e.category.endswith("multi_turn") else "multi_step"
        fc = self.format == "fc"
        text = prompts.agent_system(mode, e.language, e.involved_classes, e.functions, fc=fc)
        return render_tools_system_prompt(self.tools.schemas, text) if fc else text

    def _make_user(self, entry: Entry) -> UserSimulator:
        spec = self._user_spec
        if spec is None:
            return ScriptedUserSimulator()
        if isinstance(spec, UserSimulator):
            return spec
        return spec(entry)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        prompt, info = super().reset(seed=seed, options=options)
        entry = self.entry()
        self.runtime = AgentRuntime(entry.language, entry.initial_config, entry.involved_classes, self.mode)
        self.process, self._n_messages, self.user = [], 0, None
        self._last_verdict = Verdict(entry.id, entry.category, False, "not_verified", None, 0.0)
        if self.mode == "multi_turn":
            self.user = self._make_user(entry)
            first = self.user.start(
                entry.question, language=entry.language, involved_classes=entry.involved_classes
            )
            prompt = first if isinstance(first, str) else str(first)
            self.messages[1]["content"] = prompt
            info["messages"][1]["content"] = prompt
        return prompt, info

    # ---- one agent message -------------------------------------------------------------------
    def _route_text(self, action: Any, step: Step) -> str:
        text = _visible_text(action)
        if self.format != "fc":
            return text
        parsed = parse_tool_calls(text)
        step.parse_error = parsed.error
        if parsed.calls and not parsed.errors:
            return render_pythonic_calls([(c.name, c.arguments) for c in parsed.calls])
        step.calls = [CallRecord(c.name, c.arguments, c.error) for c in parsed.calls]
        return parsed.content if not parsed.calls else text

    def _execute(self, message: str, step: Step) -> Execution:
        execution = self.runtime.respond(message)
        self.process.append(message)
        try:
            calls = decode_execution_message(message, self.mode)
        except ValueError:
            calls = []
        results = execution.results if isinstance(execution.results, list) else []
        for i, c in enumerate(calls):
            shown = results[i] if i < len(results) and len(results) == len(calls) else execution.text
            step.calls.append(
                CallRecord(
                    c.name,
                    {str(k): v for k, v in c.kwargs.items()},
                    None,
                    True,
                    str(shown),
                    None if not execution.errors else "; ".join(execution.errors),
                )
            )
        return execution

    def _step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        raw = action if isinstance(action, str) else repr(action)
        step = Step(index=len(self.steps), text=raw)
        message = self._route_text(action, step)
        new: list[dict[str, Any]] = [{"role": "assistant", "content": raw}]
        index = self._n_messages
        self._n_messages += 1
        terminated = truncated = False
        observation, extra = "", {}
        if index > 1 and prompts.FINISH in message:
            terminated = True
        elif self._n_messages >= self.max_messages:
            truncated = True
        elif self.mode == "multi_step" or is_execution_request(message):
            execution = self._execute(message, step)
            observation = execution.text
            new.append({"role": "tool", "name": "execution", "content": observation})
            terminated = index + 1 > 1 and _holds_finish(execution.results)
            self._n_messages += 1
        else:
            try:
                reply = self.user.respond(message)
                reply = reply if isinstance(reply, str) else str(reply)
            except Exception as e:  # noqa: BLE001 - a broken simulator ends the episode, not the run
                reply, extra = "", {"error": f"user simulator failed: {type(e).__name__}: {e}"}
                truncated = True
            observation = reply
            new.append({"role": "user", "content": reply})
            terminated = terminated or (index + 1 > 1 and prompts.FINISH in reply)
            self._n_messages += 1
        if not terminated and self._n_messages >= self.max_messages:
            truncated = True
        self.steps.append(step)
        reward = 0.0
        info: dict[str, Any] = {"step": step, "messages": new, **extra}
        if terminated or truncated:
            self.done = True
            reward = self._safe_verify()
            self.final_reward = reward
            info.update(
                final_reward=reward,
                verify_error=self.verify_error,
                verdict=self._last_verdict.row(),
                process_accuracy=round(self._last_verdict.process or 0.0, 3),
            )
        step.observation, step.reward, step.terminated, step.truncated = (
            observation,
            reward,
            terminated,
            truncated,
        )
        self.messages.extend(new)
        return observation, reward, terminated, truncated, copy.deepcopy(info)

    def saved_states(self) -> list[dict[str, Any]]:
        """What ACEBench would save for this episode so far (class attributes, JSON round-tripped)."""
        return self.runtime.snapshot() if self.runtime else []

    def verify(self, task: Task, state: Any) -> float:
        self._last_verdict = verdict_agent(task.data["entry"], self.saved_states(), self.process)
        return 1.0 if self._last_verdict.valid else 0.0

    _last_verdict = Verdict("", "", False, "not_verified", None, 0.0)


def _holds_finish(results: Any) -> bool:
    try:
        return prompts.FINISH in results
    except TypeError:
        return False
