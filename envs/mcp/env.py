"""``lopd/mcp-v0``: any MCP server as a Gymnasium tool-use env, through the official ``mcp`` SDK::

    import gymnasium as gym
    import envs  # registers the lopd/* ids

    env = gym.make("lopd/mcp-v0", server=["python", "my_server.py", "--db", "{episode_dir}/db.sqlite"],
                   tasks="my_tasks.jsonl")
    obs, info = env.reset(options={"task_id": "t1"})  # starts the server; info["tools"]: its tools
    obs, reward, done, truncated, info = env.step('<tool_call>{"name": "add", "arguments": {}}</tool_call>')
    env.close()                                       # stops it; no server process is left

Each episode has its own server session: ``reset`` starts one (after closing the last) in a fresh
``{episode_dir}`` and ``close`` ends it (so does the env's garbage collection; a crash of this process
takes the server down too, through ``guard.py``). ``url=`` connects to a streamable-HTTP server instead.
A task file's checks score the episode (:mod:`envs.mcp.tasks`). With neither ``server`` nor ``tasks``,
the env plays the notes server and tasks shipped beside this file.
"""

from __future__ import annotations

import shlex
import shutil
import sys
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.core import CallPolicy, Task, ToolEnv
from envs.mcp.client import CallOutcome, McpSession, sdk_field
from envs.mcp.tasks import Episode, load_task_file, parse_task, score
from envs.tools import ToolResult, ToolSet

HERE = Path(__file__).parent
EXAMPLE_SERVER = [sys.executable, str(HERE / "example_server.py"), "--state", "{episode_dir}"]
EXAMPLE_TASKS = HERE / "example_tasks.jsonl"
PLACEHOLDER = "{episode_dir}"


def tool_schema(tool: Any) -> dict[str, Any]:
    """An MCP ``Tool`` as an OpenAI function schema."""
    params = dict(sdk_field(tool, "input_schema") or {}) or {"type": "object", "properties": {}}
    params.pop("title", None)  # pydantic's model name, not something a model should read
    return {"type": "function", "function": {"name": tool.name, "description": tool.description or "",
                                             "parameters": params}}


class McpToolSet(ToolSet):
    """The server's tools: calls go to the live session; the server checks the arguments."""

    def __init__(self, session: McpSession, tools: Sequence[Any], max_result_chars: int = 20_000):
        super().__init__(validate=False, max_result_chars=max_result_chars)
        self.session = session
        for t in tools:
            self.add(lambda **kw: None, tool_schema(t))  # placeholders: ``call`` forwards by name

    def call(self, name: str | None, arguments: dict[str, Any] | None) -> ToolResult:
        if name not in self:
            return super().call(name, arguments)  # the unknown-tool observation
        out = self.session.call(str(name), arguments or {})
        text = out.text
        if len(text) > self.max_result_chars:
            text = text[: self.max_result_chars] + f"... [truncated {len(text) - self.max_result_chars} chars]"
        return ToolResult(str(name), text, error=out.error, value=out.structured)


def _end(session: McpSession | None, folder: str | None) -> None:
    if session is not None:
        session.close()
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


class McpEnv(ToolEnv):
    """See the module docstring. ``server`` is a command (a list, or a string split like a shell's),
    ``url`` a streamable-HTTP endpoint; ``tasks`` a JSONL task file or a list of task dicts/Tasks;
    ``server_env`` extra environment variables of the server; ``call_timeout`` and ``start_timeout``
    bound each tool call and the server's start (seconds); ``keep_episode_dirs`` leaves each episode's
    folder in place (for debugging a server's state)."""

    end_on_no_call = True

    def __init__(self, server: Sequence[str] | str | None = None, *, url: str | None = None,
                 tasks: str | Path | Sequence[Any] | None = None, server_env: dict[str, str] | None = None,
                 call_timeout: float = 30.0, start_timeout: float = 30.0, keep_episode_dirs: bool = False,
                 split: str | None = None, max_steps: int | None = None, call_policy: CallPolicy | None = None,
                 render_mode: str | None = None):
        if server is not None and url is not None:
            raise ValueError("give server= (a stdio command) or url= (streamable HTTP), not both")
        if server is None and url is None:
            if tasks is not None:
                raise ValueError("tasks= needs the server they are for: give server= or url=")
            server, tasks = EXAMPLE_SERVER, EXAMPLE_TASKS
        if tasks is None:
            raise ValueError("lopd/mcp-v0 needs tasks= (a JSONL task file, see envs/mcp/tasks.py)")
        self.command = shlex.split(server) if isinstance(server, str) else None if server is None else list(server)
        if self.command is not None and not self.command:
            raise ValueError("server= is an empty command")
        if not call_timeout > 0 or not start_timeout > 0:
            raise ValueError("call_timeout and start_timeout must be positive")
        super().__init__(_tasks(tasks), split=split, max_steps=max_steps, call_policy=call_policy,
                         render_mode=render_mode)
        self.url, self.server_env = url, server_env
        self.call_timeout, self.start_timeout, self.keep_episode_dirs = call_timeout, start_timeout, keep_episode_dirs
        self.session: McpSession | None = None
        self.episode_dir: str | None = None
        self.last_checks: list[dict[str, Any]] = []
        self._finalizer: weakref.finalize | None = None

    def setup(self, task: Task) -> McpToolSet:
        self._end_session()
        self.episode_dir = tempfile.mkdtemp(prefix="lopd-mcp-")
        sub = (lambda a: a.replace(PLACEHOLDER, self.episode_dir))
        session = McpSession(command=None if self.command is None else [sub(a) for a in self.command],
                             url=None if self.url is None else sub(self.url), env=self.server_env,
                             start_timeout=self.start_timeout, call_timeout=self.call_timeout)
        # the finalizer holds no reference to the env, so garbage collection can run it
        self._finalizer = weakref.finalize(self, _end, session, None if self.keep_episode_dirs else self.episode_dir)
        self.session = session
        return McpToolSet(session, session.start())

    def verify(self, task: Task, state: McpToolSet) -> float:
        last = self.steps[-1] if self.steps else None
        # a turn with no tool call and no defect is the final answer that ended the episode
        answer = self.parse(last.text).content if last and not last.calls and last.parse_error is None else None
        episode = Episode(task, [c for s in self.steps for c in s.calls], answer, list(self.messages),
                          probe=self._probe)
        reward, self.last_checks = score(task.data["check"], episode)
        return reward

    def _probe(self, name: str, arguments: dict[str, Any]) -> CallOutcome:
        assert self.session is not None
        return self.session.call(name, arguments)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = super().step(action)
        if "final_reward" in info:
            info["checks"] = [dict(v) for v in self.last_checks]
        return obs, reward, terminated, truncated, info

    def _end_session(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # closes the session and removes the folder, once
        self._finalizer, self.session, self.episode_dir = None, None, None

    def close(self) -> None:
        self._end_session()
        super().close()


def _tasks(tasks: str | Path | Sequence[Any]) -> list[Task]:
    if isinstance(tasks, (str, Path)):
        return load_task_file(tasks)
    return [t if isinstance(t, Task) else parse_task(t) for t in tasks]
