"""``lopd/remote-v0``: an env that runs elsewhere, served by ``lopd serve``, as a local Gymnasium env.

The trainer, the evaluator and the TRL adapter use it like any env, so envs can run on other
machines or in containers while the trainer batches them::

    # on the env machine:    lopd serve lopd/shop-v0 --host 0.0.0.0 --port 8000
    env = gymnasium.make("lopd/remote-v0", url="http://envhost:8000")
    obs, info = env.reset(seed=0, options={"task_id": "shop-3"})   # info as in-process: messages, tools
    obs, reward, terminated, truncated, info = env.step("<tool_call>...</tool_call>")
    env.unwrapped.all_tasks()                                      # the served env's tasks

It speaks OpenEnv's WebSocket protocol (one session, hence one env instance on the server, per
``RemoteEnv``; ``reset``/``step`` messages on ``/ws``) with the wire format of
:mod:`envs.serving.openenv_server`: the observation is ``{"text", "truncated", **info}``, the info made
JSON, which this client turns back into what the env gave in-process (``info["step"]`` a
:class:`~envs.trace.Step` again). It does not import ``openenv``: OpenEnv's client package imports its
server package, which pins an MCP SDK older than ours (see pyproject.toml's ``serve`` extra).

A server error is an exception here, with the server's message: on ``reset`` (an unknown task id)
a ``ValueError``; on ``step`` a ``RuntimeError``, which the rollout loop turns into an ended episode;
a lost connection a ``ConnectionError``, and the next ``reset`` connects again.
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym

from envs.core import Task, TextSpace
from envs.serving.wire import info_from_fields
from envs.trace import TRACE_VERSION, Episode, Step

CONNECT_TIMEOUT_S = 30.0
MAX_MESSAGE_BYTES = 64 << 20  # an observation with a long tool list or trace stays under this


class RemoteError(RuntimeError):
    """The server answered a request with an error."""


class RemoteEnv(gym.Env[str, str]):
    """A served env (``lopd serve ENV_ID``) at ``url``; see the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, url: str, *, timeout_s: float = 600.0):
        """``url``: the server's base URL (``http://host:port``); ``timeout_s``: most seconds one reset or
        step may take on the server (an MCP tool, a sandboxed test run) before it counts as lost."""
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"lopd/remote-v0: url must be http://host:port or https://..., got {url!r}")
        self.url = url.rstrip("/")
        self.timeout_s = float(timeout_s)
        self.action_space = TextSpace()
        self.observation_space = TextSpace()
        self._ws: Any = None
        self._env_id: str | None = None
        self._tasks: list[Task] | None = None

    # ---- the gym API ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        data = {**(options or {}), **({} if seed is None else {"seed": int(seed)})}
        try:
            payload = self._request("reset", data)
        except RemoteError as e:
            raise ValueError(f"{self.url}: reset({data}) failed: {e}") from None
        text, _, info = _unpack(payload)
        return text, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        payload = self._request("step", {"text": action})
        text, truncated, info = _unpack(payload)
        done = bool(payload.get("done", False))
        reward = float(payload.get("reward") or 0.0)
        return text, reward, done and not truncated, truncated, info

    def close(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                ws.send(json.dumps({"type": "close"}))
            except Exception:  # already gone: nothing to release on our side
                pass
            ws.close()
        super().close()

    # ---- what the harness reads besides the gym API -------------------------------------------------
    @property
    def env_id(self) -> str:
        """The served env's id (``lopd/shop-v0``): traces and the experience bank name it, not us."""
        if self._env_id is None:
            self._env_id = str(self._http("GET", "/metadata").get("name", ""))
        return self._env_id

    @property
    def tasks(self) -> list[Task]:
        """What the evaluator plans over: every task of the served env (the server's own ``split`` kwarg
        still decides what a reset without a task id draws)."""
        return self.all_tasks()

    def all_tasks(self) -> list[Task]:
        """Every task of the served env, from OpenEnv's task API (fetched once; a new list each call)."""
        if self._tasks is None:
            self._tasks = self._fetch_tasks()
        return list(self._tasks)

    def _fetch_tasks(self) -> list[Task]:
        name = self._http("GET", "/list_environments")[0]
        rows: list[tuple[int, Task]] = []
        for split in self._http("GET", f"/{name}/splits"):
            split_name = split["name"] if isinstance(split, dict) else str(split)
            for t in self._http("POST", f"/{name}/tasks", {"split": split_name})["tasks"]:
                rows.append((int(t.get("index", len(rows))), Task(
                    task_id=t["task_id"], prompt=t["prompt"], split=t.get("split", split_name),
                    system=t.get("system"), data=t.get("data") or {})))
        return [t for _, t in sorted(rows, key=lambda r: r[0])]  # the env's own order, as in-process

    # ---- the wire ---------------------------------------------------------------------------------
    def _connect(self) -> Any:
        from websockets.sync.client import connect

        ws_url = "ws" + self.url[len("http"):] + "/ws"
        try:
            ws = connect(ws_url, open_timeout=CONNECT_TIMEOUT_S, max_size=MAX_MESSAGE_BYTES,
                         close_timeout=5, proxy=None)
            return ws.__enter__()  # websockets >= 17.1 warns on a connection not entered; close() ends it
        except Exception as e:
            raise ConnectionError(f"lopd/remote-v0: cannot connect to {ws_url}: {type(e).__name__}: {e}") from None

    def _request(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        from websockets.exceptions import ConnectionClosed

        if self._ws is None:
            self._ws = self._connect()
        try:
            self._ws.send(json.dumps({"type": kind, "data": data}))
            answer = json.loads(self._ws.recv(timeout=self.timeout_s))
        except (ConnectionClosed, OSError, TimeoutError) as e:
            ws, self._ws = self._ws, None  # a lost or desynchronised session: the next reset opens a new one
            ws.close()
            raise ConnectionError(f"lopd/remote-v0: {kind} on {self.url} failed: {type(e).__name__}: {e}") from None
        if answer.get("type") == "error":
            err = answer.get("data") or {}
            raise RemoteError(f"{err.get('message', 'unknown error')} (code {err.get('code', '?')})")
        return answer.get("data") or {}

    def _http(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        import httpx

        try:
            r = httpx.request(method, self.url + path, json=body, timeout=CONNECT_TIMEOUT_S)
        except httpx.HTTPError as e:
            raise ConnectionError(f"lopd/remote-v0: {method} {self.url}{path}: {type(e).__name__}: {e}") from None
        if r.status_code >= 400:
            raise RemoteError(f"{method} {self.url}{path}: HTTP {r.status_code}: {r.text[:500]}")
        return r.json()


def _unpack(payload: dict[str, Any]) -> tuple[str, bool, dict[str, Any]]:
    """The observation text, the truncated flag and the info dict, as the env gave them in-process."""
    obs = dict(payload.get("observation") or {})
    text = obs.pop("text", "")
    truncated = bool(obs.pop("truncated", False))
    obs.pop("metadata", None)  # OpenEnv's own field (empty here); an info "metadata" comes as info_metadata
    info = info_from_fields(obs)
    if isinstance(info.get("step"), dict):
        info["step"] = _step(info["step"])
    return str(text), truncated, info


def _step(d: dict[str, Any]) -> Step:
    """A Step back from its JSON form, through the trace reader's own checks."""
    return Episode.from_dict({"env_id": "", "task_id": "", "steps": [d], "version": TRACE_VERSION}).steps[0]
