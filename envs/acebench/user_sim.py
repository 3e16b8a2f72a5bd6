"""Pluggable user simulators for ACEBench agent multi-turn episodes.

A simulator has two methods: ``start(instruction, language=..., involved_classes=...)`` resets it
and returns the user's first message; ``respond(agent_message)`` returns the user's next line.
ACEBench ends a dialogue when a message contains "finish conversation" (or after 40 messages).

- :class:`EngineUserSimulator` wraps any ``generate(messages) -> str`` callable (an LLM engine,
  an HTTP client, ...): it keeps the user's chat and prompts it with ACEBench-style user rules.
- :class:`ScriptedUserSimulator` is deterministic, for tests and smoke runs: it replays given
  lines, then says "finish conversation".

>>> sim = ScriptedUserSimulator(["Send 'hi' to Frank.", "I am Eve."])
>>> sim.start("You are Eve ...", language="en", involved_classes=["MessageApi"])
"Send 'hi' to Frank."
>>> sim.respond("Who are you?"), sim.respond("Done.")
('I am Eve.', 'finish conversation')
>>> echo = EngineUserSimulator(lambda messages: f"turn {len(messages)}")
>>> echo.start("Book a flight", language="en", involved_classes=["Travel"]), echo.respond("Where to?")
('turn 2', 'turn 4')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from envs.acebench.prompts import FINISH, USER_OPENING, user_system

Generate = Callable[[list[dict[str, str]]], str]


@runtime_checkable
class UserSimulator(Protocol):
    """What an agent multi-turn env needs from a simulated user."""

    def start(self, instruction: str, *, language: str, involved_classes: Sequence[str]) -> str:
        """Reset for a new dialogue and return the user's first message."""
        ...

    def respond(self, agent_message: str) -> str:
        """The user's reply to one agent message."""
        ...


def _strip_agent_prefix(text: str) -> str:
    return text[len("agent:") :] if text.startswith("agent:") else text


class EngineUserSimulator:
    """A user simulated by any ``generate(messages) -> str`` (OpenAI-style chat messages).

    The user model sees a system message with the instruction and the user rules, then the
    opening question "Is there anything you need help with today?" as a user turn; its own lines
    are assistant turns and the agent's messages user turns (ACEBench labels the model's lines
    "system"; we use the conventional "assistant" so chat templates apply).
    """

    def __init__(self, generate: Generate):
        if not callable(generate):
            raise TypeError("generate must be callable: generate(messages) -> str")
        self.generate = generate
        self.messages: list[dict[str, str]] = []

    def _ask(self) -> str:
        reply = self.generate([dict(m) for m in self.messages])
        reply = reply if isinstance(reply, str) else str(reply)
        self.messages.append({"role": "assistant", "content": reply})
        return reply

    def start(self, instruction: str, *, language: str, involved_classes: Sequence[str]) -> str:
        self.messages = [
            {"role": "system", "content": user_system(instruction, language, list(involved_classes))},
            {"role": "user", "content": USER_OPENING[language]},
        ]
        return self._ask()

    def respond(self, agent_message: str) -> str:
        self.messages.append({"role": "user", "content": _strip_agent_prefix(agent_message)})
        return self._ask()


class ScriptedUserSimulator:
    """A deterministic user: replays ``turns`` (default: the instruction itself), then finishes."""

    def __init__(self, turns: Sequence[str] | None = None, final: str = FINISH):
        self.turns = list(turns) if turns is not None else None
        self.final = final
        self._queue: list[str] = []

    def start(self, instruction: str, *, language: str, involved_classes: Sequence[str]) -> str:
        self._queue = list(self.turns) if self.turns is not None else [instruction]
        return self._queue.pop(0) if self._queue else self.final

    def respond(self, agent_message: str) -> str:
        return self._queue.pop(0) if self._queue else self.final
