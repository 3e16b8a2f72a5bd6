"""The records a bank holds and returns: :class:`Experience`, its :class:`SourceRef`, and :class:`Hit`."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any


@dataclass(frozen=True)
class SourceRef:
    """Where an experience came from: a trace file and its position there."""

    file: str
    """Absolute path of the JSONL trace file (or a caller's label for in-memory episodes)."""
    line: int | None
    """1-based line number in that file (None for in-memory episodes)."""
    episode_index: int
    """0-based index of the episode among the file's readable episodes."""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line is not None else f"{self.file}#{self.episode_index}"


@dataclass(frozen=True)
class Experience:
    """One successful training episode, rendered observation-lite.

    ``text`` (task + trajectory) is what the composer reads and what OPSD shows as an oracle.
    """

    env_id: str
    task_id: str
    reward: float
    split: str
    """Always a training split (the bank refuses anything else)."""
    task: str
    """The task description (the episode's first user message)."""
    trajectory: str
    """The action/result sequence: tool calls exact, observations cut to the budget."""
    source: SourceRef
    meta: dict[str, Any] = field(default_factory=dict)
    """Small facts about the episode: steps, tool calls, seed."""

    @property
    def text(self) -> str:
        """What the composer reads: the task and the trajectory, or a chat-template rendering (which
        holds the task) as it is."""
        if self.meta.get("render") == "chat_template":
            return self.trajectory
        return render_text(self.task, self.trajectory)

    @cached_property
    def key(self) -> str:
        """Content fingerprint; two experiences with the same key are duplicates."""
        h = hashlib.sha256()
        for part in (self.env_id, self.task, self.trajectory):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\x00")
        return h.hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Experience:
        d = dict(d)
        src = d.pop("source")
        return cls(source=SourceRef(**src), **d)


def render_text(task: str, trajectory: str) -> str:
    """The experience text: ``Task: ...`` then ``Trajectory:`` and the action/result lines."""
    return f"Task: {task}\n\nTrajectory:\n{trajectory}"


@dataclass(frozen=True)
class Hit:
    """One retrieved experience with its cosine score (inner product of normalised vectors)."""

    id: int
    """Position of the experience in the bank (stable across saves and adds)."""
    score: float
    experience: Experience
