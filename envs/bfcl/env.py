"""BFCL-v3 as Gymnasium environments: one id per category, prompting or FC format.

>>> import gymnasium as gym, envs                                          # doctest: +SKIP
>>> env = gym.make("lopd/bfcl-v3-simple-v0", fmt="prompt").unwrapped       # doctest: +SKIP
>>> obs, info = env.reset(options={"task_id": "simple_0"})                 # doctest: +SKIP
>>> env.step("[calculate_triangle_area(base=10, height=5)]")[1]           # doctest: +SKIP
1.0

Single-turn categories: one assistant response; the reward is the official verdict (1.0 or 0.0).
Multi-turn categories: each response that decodes to calls is executed against the official
simulated API classes and the results come back as the observation; a response without a decodable
call ends the user turn and the next user turn is the observation (a withheld-function turn brings
the missing docs back with BFCL's message). More than 20 executed steps in one turn force-quit the
episode (``truncated``); as upstream, that fails the entry unless it happened in the last turn. The
reward, at the end, is the official all-or-nothing verdict.

``fmt="fc"`` (default): the model writes Hermes ``<tool_call>`` blocks, names with dots written as
underscores, and gets the tools as OpenAI schemas (``info["tools"]``, and in the system prompt);
``fmt="prompt"``: the model writes ``[f(a=1)]`` and the docs are in BFCL's system prompt.
``info["verdict"]`` holds {valid, error_type, error} when the episode ends, and ``info["bfcl_result"]``
the response in BFCL's result-file format (what ``lopd score bfcl-v3`` reads).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from envs.bfcl.ast_checker import Verdict
from envs.bfcl.data import CATEGORIES, Entry, is_multi_turn, load_entries
from envs.bfcl.decode import DecodeError, decode_ast_prompt
from envs.bfcl.multi_turn import DEFAULT_MODEL_NAME, MAX_STEPS_PER_TURN, MultiTurnRun, decode_step
from envs.bfcl.prompts import added_functions_message, fc_tools, prompt_system
from envs.bfcl.scoring import FORMATS, score_entry
from envs.core import MAX_TEXT, Task, ToolEnv
from envs.protocol import as_openai_tool, parse_tool_calls, render_tools_system_prompt, split_reasoning, \
    wrap_tool_response
from envs.trace import CallRecord, Step

EPISODE_OVER = "Error: the episode is over; call reset()."


@dataclass
class _Episode:
    entry: Entry
    functions: list[dict[str, Any]]
    verdict: Verdict | None = None
    result: Any = None
    """The episode's responses in BFCL's result format."""
    run: MultiTurnRun | None = None
    turn: int = 0
    turn_steps: int = 0
    turns: list[list[Any]] = field(default_factory=list)


class BfclEnv(ToolEnv):
    """A BFCL-v3 single-turn category (see the module docstring)."""

    max_steps = 1

    def __init__(self, category: str = "simple", fmt: str = "fc", *, model_name: str = DEFAULT_MODEL_NAME,
                 tasks: list[Task] | None = None, split: str | None = None, render_mode: str | None = None):
        if category not in CATEGORIES:
            raise ValueError(f"unknown BFCL-v3 category {category!r}; expected one of {CATEGORIES}")
        if fmt not in FORMATS:
            raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
        super().__init__(tasks, split=split, render_mode=render_mode)
        self.category, self.fmt, self.model_name = category, fmt, model_name
        self.state: _Episode | None = None

    # ---- ToolEnv hooks ----------------------------------------------------------------------
    def load_tasks(self) -> list[Task]:
        tasks = []
        for e in load_entries(self.category):
            first = [m for m in (e.question[0] if e.question else []) if m.get("role") != "system"]
            prompt = first[-1]["content"] if first else ""
            tasks.append(Task(e.id, prompt, split="eval", data={"entry": e, "category": self.category}))
        return tasks

    def setup(self, task: Task) -> _Episode:
        entry: Entry = task.data["entry"]
        return _Episode(entry, [dict(f) for f in entry.functions])

    def verify(self, task: Task, state: _Episode) -> float:
        return 1.0 if state.verdict is not None and state.verdict.valid else 0.0

    # ---- prompts ----------------------------------------------------------------------------
    def _tools(self, functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.fmt != "fc":
            return []
        return [as_openai_tool(t) for t in fc_tools(functions, self.category)]

    def _system(self, functions: list[dict[str, Any]], own: str | None) -> str:
        if self.fmt == "fc":
            return render_tools_system_prompt(self._tools(functions), own)
        text = prompt_system(functions, self.category)
        return f"{text}\n\n{own}" if own else text

    def begin_episode(self, task: Task, state: _Episode) -> tuple[str, dict[str, Any]]:
        """The entry's first turn: BFCL's system prompt (holding the entry's own system text, if any)
        and its other messages, the last of which is the observation."""
        self._begin(state)
        turn0 = list(state.entry.question[0]) if state.entry.question else []
        own = turn0[0]["content"] if turn0 and turn0[0].get("role") == "system" else None
        rest = [dict(m) for m in turn0 if m.get("role") != "system"]
        self.messages = [{"role": "system", "content": self._system(state.functions, own)}] + rest
        info = {"task_id": task.task_id, "split": task.split, "category": self.category,
                "fmt": self.fmt, "tools": self._tools(state.functions), "messages": self.messages}
        return self._clip(rest[-1]["content"] if rest else ""), info

    def _begin(self, episode: _Episode) -> None:
        """Hook for subclasses: prepare per-episode state after setup."""

    # ---- parsing ------------------------------------------------------------------------------
    def _raw_step(self, action: Any, step: Step) -> Any:
        """The response in BFCL's result format, and the calls recorded on ``step``."""
        if not isinstance(action, str) or len(action) > MAX_TEXT:
            step.parse_error = f"action must be a string of at most {MAX_TEXT} characters"
            return None
        if self.fmt == "fc":
            parsed = parse_tool_calls(action)
            step.calls = [CallRecord(c.name, c.arguments, c.error) for c in parsed.calls]
            step.parse_error = "; ".join(parsed.errors) or None
            if parsed.errors:
                return []  # like BFCL's Hermes FC handler: one bad block voids the response
            if not parsed.calls:
                return parsed.content
            return [{c.name: json.dumps(c.arguments, ensure_ascii=False)} for c in parsed.calls]
        _, content = split_reasoning(action)
        try:
            decoded = decode_ast_prompt(content, self.state.entry.language if self.state else "Python")
            if isinstance(decoded, list):
                step.calls = [CallRecord(str(n), a if isinstance(a, dict) else None)
                              for d in decoded if isinstance(d, dict) for n, a in d.items()]
        except DecodeError as e:
            step.parse_error = str(e)
        except Exception as e:  # the checker re-decodes and fails this the same way
            step.parse_error = f"{type(e).__name__}: {e}"[:300]
        return content

    @staticmethod
    def _clip(text: str) -> str:
        return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 40] + "\n[... observation truncated]"

    def _finish(self, step: Step, info: dict[str, Any]) -> float:
        self.done = True
        reward = self._safe_verify()
        self.final_reward = reward
        verdict = self.state.verdict if self.state and self.state.verdict else Verdict(False, "no_verdict")
        info.update(final_reward=reward, verify_error=self.verify_error, verdict=verdict.as_dict(),
                    bfcl_result=copy.deepcopy(self.state.result) if self.state else None)
        return reward

    # ---- Gymnasium API -------------------------------------------------------------------------
    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self.task is None or self.state is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            return EPISODE_OVER, 0.0, True, False, {"error": "episode_over"}
        step = Step(index=len(self.steps), text=action if isinstance(action, str) else repr(action))
        result = self._raw_step(action, step)
        self.state.result = result
        self.state.verdict = score_entry(self.state.entry, result, self.fmt, self.model_name)
        info: dict[str, Any] = {"step": step, "messages": [{"role": "assistant", "content": step.text}]}
        reward = self._finish(step, info)
        step.observation, step.reward, step.terminated = "", reward, True
        self.steps.append(step)
        self.messages.extend(info["messages"])
        return "", reward, True, False, copy.deepcopy(info)


class BfclMultiTurnEnv(BfclEnv):
    """A BFCL-v3 multi-turn category (see the module docstring)."""

    def __init__(self, category: str = "multi_turn_base", fmt: str = "fc", **kwargs: Any):
        super().__init__(category, fmt, **kwargs)
        if not is_multi_turn(category):
            raise ValueError(f"{category!r} is not a multi-turn category")

    def _begin(self, episode: _Episode) -> None:
        if episode.entry.answer is None:
            raise ValueError(f"{episode.entry.id} has no ground truth")
        episode.run = MultiTurnRun(episode.entry, self.model_name)
        episode.turns = [[]]
        episode.result = episode.turns

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self.task is None or self.state is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            return EPISODE_OVER, 0.0, True, False, {"error": "episode_over"}
        ep = self.state
        assert ep.run is not None
        step = Step(index=len(self.steps), text=action if isinstance(action, str) else repr(action))
        raw = self._raw_step(action, step)
        ep.turns[-1].append(raw)
        calls = decode_step(raw, self.fmt)
        new: list[dict[str, Any]] = [{"role": "assistant", "content": step.text}]
        info: dict[str, Any] = {"step": step, "messages": new, "turn": ep.turn}
        terminated = truncated = False
        reward = 0.0
        if calls is not None:
            results = ep.run.step(calls)
            ep.turn_steps += 1
            step.calls = [CallRecord(c, None, executed=True, result=r) for c, r in zip(calls, results)]
            new.extend({"role": "tool", "name": c, "content": r} for c, r in zip(calls, results))
            observation = self._clip("\n".join(wrap_tool_response(r) for r in results))
            if ep.turn_steps > MAX_STEPS_PER_TURN:  # BFCL force-quits the inference here
                truncated = True
                last = ep.turn == len(ep.entry.answer) - 1
                if last:
                    ep.run.end_turn()
                    ep.verdict = ep.run.verdict
                else:
                    ep.verdict = Verdict(False, "multi_turn:force_terminated", [
                        f"Model was force-quit after more than {MAX_STEPS_PER_TURN} steps in turn {ep.turn}."])
                reward = self._finish(step, info)
        else:
            ep.run.end_turn()
            ep.turn += 1
            ep.turn_steps = 0
            if ep.turn >= len(ep.entry.question):
                terminated = True
                ep.verdict = ep.run.verdict
                observation = ""
                reward = self._finish(step, info)
            else:
                observation = self._next_turn(ep, new, info)
        step.observation, step.reward = observation, reward
        step.terminated, step.truncated = terminated, truncated
        self.steps.append(step)
        self.messages.extend(new)
        return observation, reward, terminated, truncated, copy.deepcopy(info)

    def _next_turn(self, ep: _Episode, new: list[dict[str, Any]], info: dict[str, Any]) -> str:
        ep.turns.append([])
        messages = [dict(m) for m in ep.entry.question[ep.turn]]
        missed = ep.entry.missed_function.get(str(ep.turn))
        if missed is not None:
            ep.functions.extend(missed)
            messages = [{"role": "user", "content": added_functions_message(missed, self.fmt)}]
            if self.fmt == "fc":  # the tool list changes: the system prompt is rebuilt with it
                own = next((m["content"] for m in ep.entry.question[0][:1] if m.get("role") == "system"), None)
                self.messages[0] = {"role": "system", "content": self._system(ep.functions, own)}
                info["system"] = self.messages[0]["content"]
                info["tools"] = self._tools(ep.functions)
        new.extend(messages)
        return self._clip(messages[-1]["content"] if messages else "")
