"""``lopd serve``: any registered env as an OpenEnv server, built on OpenEnv's own server package.

OpenEnv's ``create_app`` gives the protocol (``/ws`` sessions, ``/reset``, ``/step``, ``/schema``,
``/metadata``, ``/health``, the Task API, session limits); this module gives it an
:class:`~openenv.core.env_server.interfaces.Environment` that wraps ``gym.make(env_id, **kwargs)``,
one instance per client session. The wire format::

    reset  {"seed": 0, "task_id": "apples"}      # every key but seed/episode_id is a reset option
    step   {"text": "<tool_call>...</tool_call>"}
    observation {"text": ..., "truncated": false, **info}   # reward and done beside it, as OpenEnv has them

The info's JSON form is :func:`envs.serving.wire.jsonable_info`'s: a :class:`~envs.trace.Step` as
its dict, values that are not JSON dropped (their keys in ``dropped_info_keys``).

It imports ``openenv``, which runs in ``.venv-openenv`` (see :mod:`envs.serving.venv`); ``lopd serve``
takes care of that.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import ConfigDict, Field

from envs.serving.wire import jsonable_info

MAX_MESSAGE_BYTES = 4 << 20  # a WebSocket message or HTTP body past this is refused (413 / close 1009)


class TextAction(Action):
    """What the policy said: tool calls in the env's format, or a final answer."""

    text: str = Field(description="The assistant message, e.g. '<tool_call>{...}</tool_call>'")


class TextObservation(Observation):
    """What the env answered, and its info fields (open-ended: each env has its own)."""

    model_config = ConfigDict(extra="allow", validate_assignment=True, arbitrary_types_allowed=True)
    text: str = Field(default="", description="The observation text the env returned")
    truncated: bool = Field(default=False, description="The episode hit its turn limit")


class GymEnvironment(Environment[TextAction, TextObservation, State]):
    """One session's env: ``gym.make(env_id, **kwargs)``, driven through OpenEnv's interface."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session builds its own env; envs keep no shared state

    def __init__(self, env_id: str, kwargs: dict[str, Any]):
        from envs.registry import make

        super().__init__()
        self.env_id = env_id
        self.env = make(env_id, **kwargs)
        self._state = State()
        self._started = False

    def reset(self, seed: int | None = None, episode_id: str | None = None, **options: Any) -> TextObservation:
        text, info = self.env.reset(seed=seed, options=options or None)
        self._state = State(episode_id=episode_id, step_count=0)
        self._started = True
        return TextObservation(text=text, **jsonable_info(info))

    def step(self, action: TextAction, timeout_s: float | None = None, **kwargs: Any) -> TextObservation:
        if not self._started:
            raise RuntimeError("step before reset: send a reset first")
        text, reward, terminated, truncated, info = self.env.step(action.text)
        self._state.step_count += 1
        return TextObservation(text=text, truncated=truncated, done=terminated or truncated, reward=reward,
                               **jsonable_info(info))

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        self.env.close()

    def get_metadata(self) -> EnvironmentMetadata:
        from importlib.metadata import version

        doc = (type(self.env.unwrapped).__doc__ or "").strip()
        return EnvironmentMetadata(name=self.env_id, description=doc.split("\n\n")[0] or self.env_id,
                                   version=version("lopd-gym"), author="LOPD Gym")

    # ---- OpenEnv's Task API: the env's tasks, by split ------------------------------------------
    def _tasks(self, split: str | None = None) -> list[dict[str, Any]]:
        tasks = getattr(self.env.unwrapped, "all_tasks", lambda: [])()
        # "index": the task's place in the env's own order, which planners (lopd eval) follow
        return [{**dataclasses.asdict(t), "index": i} for i, t in enumerate(tasks) if split is None or t.split == split]

    def list_splits(self) -> list[str]:
        return list(dict.fromkeys(t["split"] for t in self._tasks()))

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return self._tasks(split)

    def num_tasks(self, split: str) -> int:
        return len(self._tasks(split))

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        tasks = self._tasks(split)
        if not 0 <= index < len(tasks):
            raise IndexError(index)
        return tasks[index]

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[dict[str, Any]]:
        return self._tasks(split)[start:stop]


def route_name(env_id: str) -> str:
    """The env's name in the Task API's paths (``/{name}/tasks``): the id without ``/``."""
    return env_id.replace("/", "__")


def build_app(env_id: str, kwargs: dict[str, Any], *, max_sessions: int = 16) -> Any:
    """The FastAPI app serving ``env_id``; builds one env first, so a bad id or kwarg fails here."""
    GymEnvironment(env_id, kwargs).close()
    app = create_app(lambda: GymEnvironment(env_id, kwargs), TextAction, TextObservation,
                     env_name=route_name(env_id), max_concurrent_envs=max_sessions)
    app.add_middleware(_BodyLimit, limit=MAX_MESSAGE_BYTES)
    return app


class _BodyLimit:
    """ASGI middleware: an HTTP request body past ``limit`` bytes is answered 413 before it is read."""

    def __init__(self, app: Any, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await _too_large(send, self.limit)
        seen = 0

        async def counted() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooLarge
            return message

        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await _too_large(send, self.limit)


class _TooLarge(Exception):
    pass


async def _too_large(send: Any, limit: int) -> None:
    body = json.dumps({"detail": f"request body over {limit} bytes"}).encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def serve(env_id: str, kwargs: dict[str, Any], *, host: str = "127.0.0.1", port: int = 8000,
          max_sessions: int = 16) -> None:
    """Serve ``env_id`` until interrupted (uvicorn; one worker, sessions run in its thread pool)."""
    import uvicorn

    app = build_app(env_id, kwargs, max_sessions=max_sessions)
    print(f"lopd serve: {env_id} on http://{host}:{port} (at most {max_sessions} sessions)", flush=True)
    uvicorn.run(app, host=host, port=port, ws_max_size=MAX_MESSAGE_BYTES, log_level="warning")
