"""Any lopd env id as a multi-turn tool environment of TRL's ``GRPOTrainer`` (``environment_factory``)::

    from trl import GRPOConfig, GRPOTrainer

    from envs.integrations.trl import trl_dataset, trl_env_reward, trl_environment_factory

    env_id, env_kwargs = "lopd/shop-v0", {}      # or "lopd/remote-v0", {"url": "http://envhost:8000"}
    trainer = GRPOTrainer(
        model="Qwen/Qwen3-0.6B",
        args=GRPOConfig(output_dir="runs/trl-shop", num_generations=4, max_completion_length=1024,
                        max_tool_calling_iterations=8, chat_template_kwargs={"enable_thinking": False}),
        train_dataset=trl_dataset(env_id, split="train", **env_kwargs),     # prompt, task_id (, environment)
        environment_factory=trl_environment_factory(env_id, **env_kwargs),  # the env's tools as methods
        reward_funcs=trl_env_reward,                                       # the env's own verdict
    )
    trainer.train()

Pass the same env kwargs to both. How TRL's contract (``GRPOTrainer``'s ``environment_factory``) is met:

* TRL calls ``reset(**row)`` once per rollout: the gym env resets on the row's ``task_id``. ``reset`` returns
  None, as the row's ``prompt`` already holds the env's opening messages; their tool list is left out,
  since TRL's chat template renders it from the tool methods.
* Each tool of the env is a public method named after it, with keyword-only typed arguments and a
  Google-style docstring, which TRL finds with ``inspect.getmembers``; transformers' ``get_json_schema``
  answers the env's own schema for these methods (see ``exact_schemas``). TRL calls
  ``method(**arguments)``; the adapter steps the env with that one ``<tool_call>`` and returns the tool's
  reply. Bad arguments come back as the env's own error text, never as an exception.
* TRL ends a rollout at the first message without a tool call. :func:`trl_env_reward` steps the env with
  that message (the final answer), which ends the episode, and returns the env's verdict. A rollout
  TRL cut short with calls pending (``max_completion_length``, ``max_tool_calling_iterations``), or whose
  env did not end on the final answer (an env that plays several user turns), scores 0.0, as a
  truncated episode does in our own rollouts, and counts in the ``lopd/unfinished`` metric.
* An env whose tools differ between tasks (BFCL, ACEBench, micro) gives a dict of factories, one per
  tool set, and :func:`trl_dataset` an ``environment`` column that routes each row to its own.

Unlike our rollouts, every tool call is one env step (TRL runs calls one at a time), so ``max_steps``
counts calls and a "first" call policy sees each call alone; TRL lists tools by name, answers a call
of an unknown tool itself, and ignores the text around tool calls.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import inspect
import json
import keyword
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Union

import gymnasium as gym

import envs  # noqa: F401  (registers the lopd/* ids, lopd/remote-v0 included)
from envs.protocol import TOOL_RESPONSE_CLOSE, TOOL_RESPONSE_OPEN, as_openai_tool, render_tools_system_prompt

__all__ = ["TRLEnvironmentFactory", "trl_dataset", "trl_env_reward", "trl_environment_factory"]

RESERVED_NAMES = frozenset({"reset", "get_reward"})
"""Method names TRL gives a meaning of its own; names starting with ``_`` it does not expose at all."""
_SCHEMA_ATTR = "__lopd_tool_schema__"
_PATCHED = "__lopd_exact_schemas__"
_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}
_JSON_SCALAR = (str, int, float, bool, type(None))


# ---- what an env offers: its tasks' opening messages and tool sets -------------------------------------
@dataclass(frozen=True)
class _TaskPlan:
    task_id: str
    split: str
    prompt: list[dict[str, Any]]
    """The env's opening messages without the tool list (the chat template renders it from the methods)."""
    tools_key: str


@dataclass
class _Plan:
    env_id: str
    tasks: list[_TaskPlan]
    toolsets: dict[str, list[dict[str, Any]]]
    """Tool-set key -> the env's tool schemas (OpenAI form), for every tool set some task uses."""
    spare: list[gym.Env]
    """The env the tasks were read with, for the first factory's pool."""


class _Shared:
    """What the TRL environments of one :func:`trl_environment_factory` call share: idle gym envs, counters.

    TRL keeps one environment object per rollout slot and per tool set, for the whole run; a gym env
    is held only while its episode runs, so the live gym envs (for lopd/remote-v0, server sessions)
    stay as many as the rollouts of one batch, whatever the number of tool sets."""

    def __init__(self, env_id: str, env_kwargs: dict[str, Any]):
        self.env_id, self.env_kwargs = env_id, dict(env_kwargs)
        self._idle: list[gym.Env] = []
        self._lock = threading.Lock()
        self.stats = {"resets": 0, "steps": 0, "episodes": 0, "unfinished": 0, "env_errors": 0}

    def acquire(self) -> gym.Env:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return gym.make(self.env_id, **self.env_kwargs)

    def release(self, env: gym.Env, *, broken: bool = False) -> None:
        if broken:  # an env that raised is closed, not reused: its next episode gets a fresh one
            try:
                env.close()
            except Exception:  # noqa: BLE001 - closing a broken env is best effort
                pass
            return
        with self._lock:
            self._idle.append(env)

    def count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.stats[key] += n

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for env in idle:
            env.close()


_PLANS: dict[str, _Plan] = {}
_PLANS_LOCK = threading.Lock()


def _plan(env_id: str, env_kwargs: dict[str, Any]) -> _Plan:
    """Reset one env on every task once (cached per env id + kwargs): the opening messages and tools."""
    key = json.dumps([env_id, env_kwargs], sort_keys=True, default=repr)
    with _PLANS_LOCK:
        if key in _PLANS:
            return _PLANS[key]
        env = gym.make(env_id, **env_kwargs)
        tasks, toolsets, failed = [], {}, []
        for task in env.unwrapped.all_tasks():
            try:
                _, info = env.reset(options={"task_id": task.task_id})
            except Exception as e:  # noqa: BLE001 - a task that cannot start is left out, with the reason
                failed.append(f"{task.task_id}: {type(e).__name__}: {e}")
                continue
            tools = [as_openai_tool(t) for t in info.get("tools") or []]
            tkey = _tools_key(tools)
            toolsets.setdefault(tkey, tools)
            tasks.append(_TaskPlan(str(task.task_id), str(task.split), _trl_prompt(info.get("messages") or [], tools),
                                   tkey))
        if failed:
            warnings.warn(f"{env_id}: {len(failed)} task(s) could not be reset and are left out, e.g. {failed[0]}",
                          stacklevel=3)
        if not tasks:
            env.close()
            raise ValueError(f"{env_id} has no task that resets")
        _PLANS[key] = plan = _Plan(env_id, tasks, toolsets, [env])
        return plan


def _tools_key(tools: Sequence[dict[str, Any]]) -> str:
    blob = json.dumps([as_openai_tool(t) for t in tools], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _trl_prompt(messages: Sequence[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The opening messages as TRL should get them: the tool list the env wrote into its system message
    (our Qwen3 rendering, :func:`render_tools_system_prompt`) taken out, since the chat template adds it."""
    msgs = copy.deepcopy(list(messages))
    if tools and msgs and msgs[0].get("role") == "system" and isinstance(msgs[0].get("content"), str):
        block, content = render_tools_system_prompt(tools, None), msgs[0]["content"]
        if content.endswith(block):
            head = content[: len(content) - len(block)].removesuffix("\n\n")
            msgs = [{**msgs[0], "content": head}, *msgs[1:]] if head else msgs[1:]
    return msgs


# ---- the dataset -----------------------------------------------------------------------------------------
def trl_dataset(env_id: str, split: str | None = "train", **env_kwargs: Any):
    """A ``datasets.Dataset`` of the env's tasks of ``split`` (None: every task) for ``GRPOTrainer``:
    ``prompt`` (the env's opening chat messages), ``task_id`` (what ``reset`` plays) and, for an env whose
    tools differ between tasks, ``environment`` (which of :func:`trl_environment_factory`'s factories)."""
    from datasets import Dataset

    plan = _plan(env_id, env_kwargs)
    rows = [t for t in plan.tasks if split is None or t.split == split]
    if not rows:
        splits = sorted({t.split for t in plan.tasks})
        raise ValueError(f"{env_id} has no task in split {split!r}; its splits: {splits}")
    routed = len(plan.toolsets) > 1
    return Dataset.from_list([{"prompt": t.prompt, "task_id": t.task_id,
                               **({"environment": _env_name(env_id, t.tools_key)} if routed else {})}
                              for t in rows])


def _env_name(env_id: str, tools_key: str) -> str:
    return f"{env_id}#{tools_key}"


# ---- the environment -------------------------------------------------------------------------------------
class _TRLEnvironment:
    """One rollout slot of TRL over a gym env. Its public surface is TRL's contract and nothing else:
    ``reset`` and one method per tool (added per tool set by :func:`_environment_class`)."""

    _tools_key = ""
    _tool_names: frozenset[str] = frozenset()

    def __init__(self, shared: _Shared):
        self._shared = shared
        self._env: gym.Env | None = None
        self._status = "idle"  # running | done (the env ended the episode) | unfinished | env_error | idle
        self._reward: float | None = None
        self._scored: float | None = None
        self._error: str | None = None
        self._task_id: str | None = None

    def reset(self, **kwargs: Any) -> str | None:
        """Start the episode of the dataset row ``kwargs`` (TRL passes every column): its ``task_id``, or a
        task the env draws (seeded by a ``seed`` column, if any), whose prompt is then returned."""
        task_id, seed = kwargs.get("task_id"), kwargs.get("seed")
        if self._env is None:
            self._env = self._shared.acquire()
        self._status, self._reward, self._scored, self._error = "idle", None, None, None
        options = {} if task_id is None else {"task_id": str(task_id)}
        observation, info = self._env.reset(seed=None if seed is None else int(seed), options=options)
        if _tools_key(info.get("tools") or []) != self._tools_key:
            raise ValueError(
                f"{self._shared.env_id}: task {info.get('task_id', task_id)!r} has tools other than this "
                f"environment's ({sorted(self._tool_names)}); route rows with trl_dataset's `environment` column")
        self._status, self._task_id = "running", str(info.get("task_id", task_id))
        self._shared.count("resets")
        return None if task_id is not None else observation

    def _call_tool(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """One tool call of the model, as its own env step; the tool's reply (or an error text)."""
        if args:
            return f"Error: {name} takes its arguments by name, got {len(args)} positional argument(s)."
        if self._env is None or self._status == "idle":
            return "Error: no episode is running (reset() was not called)."
        if self._status == "env_error":
            return f"Error: the environment is unavailable ({self._error})."
        text = f"<tool_call>\n{_call_json(name, kwargs)}\n</tool_call>"
        got = self._step(text)
        if got is None:
            return f"Error: the environment failed on this call ({self._error})."
        observation, info = got
        replies = [str(m.get("content", "")) for m in info.get("messages") or [] if m.get("role") == "tool"]
        return "\n".join(replies) if replies else _unwrap(observation)

    def _step(self, text: str) -> tuple[str, dict[str, Any]] | None:
        try:
            observation, reward, terminated, truncated, info = self._env.step(text)
        except Exception as e:  # noqa: BLE001 - a failing env (a lost server) ends the episode, not the run
            self._status, self._error = "env_error", f"{type(e).__name__}: {e}"[:500]
            self._shared.count("env_errors")
            return None
        self._shared.count("steps")
        if self._status == "running" and (terminated or truncated):
            self._status, self._reward = "done", float(info.get("final_reward", reward))
        return str(observation), info

    def _score(self, completion: Any) -> float:
        """The episode's reward once TRL's rollout is over: the final answer goes to the env, which ends the
        episode with its verdict. Idempotent; the gym env goes back to the pool."""
        if self._scored is not None:
            return self._scored
        if self._status == "running":
            final = _final_text(completion)
            if final is None:  # TRL stopped while tool calls were pending
                self._status = "unfinished"
            elif self._step(final) is not None and self._status == "running":
                self._status = "unfinished"  # the env went on: it wants turns TRL's loop does not give
        reward = self._reward if self._status == "done" and self._reward is not None else 0.0
        self._shared.count("episodes")
        if self._status == "unfinished":
            self._shared.count("unfinished")
        if self._env is not None:
            self._shared.release(self._env, broken=self._status == "env_error")
            self._env = None
        self._scored = reward
        return reward

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._shared.env_id} task={self._task_id} {self._status}>"


def _call_json(name: str, arguments: dict[str, Any]) -> str:
    # "<" only ever stands inside JSON strings, where \u003c means the same: no argument can close the block
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False, default=str).replace("<", "\\u003c")


def _unwrap(observation: str) -> str:
    text = observation.strip()
    if text.startswith(TOOL_RESPONSE_OPEN) and text.endswith(TOOL_RESPONSE_CLOSE):
        text = text[len(TOOL_RESPONSE_OPEN):-len(TOOL_RESPONSE_CLOSE)].strip("\n")
    return text


def _final_text(completion: Any) -> str | None:
    """The model's whole final message (reasoning included), or None when the rollout ended on tool calls."""
    if isinstance(completion, str):  # a standard (not conversational) dataset
        return completion
    if not isinstance(completion, list) or not completion or not isinstance(completion[-1], dict):
        return None
    last = completion[-1]
    if last.get("role") != "assistant" or last.get("tool_calls"):
        return None
    content = last.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    text = content if isinstance(content, str) else ""
    reasoning = last.get("reasoning_content") or last.get("reasoning") or last.get("thinking")
    return f"<think>\n{reasoning}\n</think>\n\n{text}" if isinstance(reasoning, str) and reasoning else text


# ---- tool methods from schemas ------------------------------------------------------------------------------
def _environment_class(env_id: str, tools_key: str, tools: list[dict[str, Any]], exact: bool) -> type:
    ns: dict[str, Any] = {"__module__": __name__, "_tools_key": tools_key,
                          "__doc__": f"{env_id} for TRL (tool set {tools_key}): reset and one method per tool."}
    names, hidden = [], []
    for schema in tools:
        fn = _tool_method(schema, exact)
        if not fn.__name__ or fn.__name__ in RESERVED_NAMES or fn.__name__.startswith("_") or fn.__name__ in ns:
            hidden.append(fn.__name__)  # TRL reserves reset/get_reward and never exposes a name starting with _
            continue
        ns[fn.__name__] = fn
        names.append(fn.__name__)
    if hidden:
        warnings.warn(f"{env_id}: tool(s) {hidden} cannot be TRL environment methods (TRL reserves "
                      f"{sorted(RESERVED_NAMES)} and hides names starting with '_'): the model will not see them",
                      stacklevel=3)
    ns["_tool_names"] = frozenset(names)
    slug = "".join(p.capitalize() for p in env_id.replace("/", "-").replace("_", "-").split("-") if p.isalnum())
    return type(f"{slug}TRLEnv_{tools_key}", (_TRLEnvironment,), ns)


def _tool_method(schema: dict[str, Any], exact: bool) -> Callable[..., str]:
    """A method TRL and transformers read as this tool: its name, a Google-style docstring and keyword-only
    typed parameters (the schema's properties, in order). It forwards the arguments it was given, and only
    those (no default is filled in), so the env validates exactly what the model sent."""
    fn_schema = as_openai_tool(schema)["function"]
    name = str(fn_schema.get("name", ""))
    params = fn_schema.get("parameters") or {}
    props = params.get("properties") if isinstance(params.get("properties"), dict) else {}
    required = set(params.get("required") or [])

    def tool(self, *args, **kwargs):  # what TRL and transformers read is set below
        return self._call_tool(name, args, kwargs)

    sig = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    hints: dict[str, Any] = {}
    doc_args = []
    for pname, pschema in props.items():
        if not (isinstance(pname, str) and pname.isidentifier()) or keyword.iskeyword(pname) or pname == "self":
            continue  # not a Python parameter name: the schema still says it (exact_schemas), the signature cannot
        hint = _hint(pschema)
        default = inspect.Parameter.empty if pname in required else (
            pschema.get("default") if isinstance(pschema, dict) else None)
        sig.append(inspect.Parameter(pname, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint))
        hints[pname] = hint
        desc = pschema.get("description") if isinstance(pschema, dict) else None
        doc_args.append(f"    {pname}: {_one_line(desc) or pname}")
    description = str(fn_schema.get("description") or "").strip() or f"The {name} tool."
    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = description + ("\n\nArgs:\n" + "\n".join(doc_args) if doc_args else "")
    # No return hint: get_json_schema would add a "return" the env's schema does not have.
    tool.__signature__ = inspect.Signature(sig)  # type: ignore[attr-defined]
    tool.__annotations__ = hints
    if exact:
        setattr(tool, _SCHEMA_ATTR, {"type": "function", "function": copy.deepcopy(fn_schema)})
    return tool


def _one_line(text: Any) -> str:
    return " ".join(str(text).split()) if text else ""


def _hint(schema: Any) -> Any:
    """The Python type hint transformers' ``get_json_schema`` reads back as (most of) this JSON schema."""
    if not isinstance(schema, dict):
        return Any
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(type(v) in _JSON_SCALAR for v in enum):
        return Literal[tuple(enum)]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return _union([_hint(s) for s in schema[key]])
    t = schema.get("type")
    if isinstance(t, list) and t:
        return _union([_hint({"type": x, "items": schema.get("items"),
                              "additionalProperties": schema.get("additionalProperties")}) for x in t])
    if t in _SCALARS:
        return _SCALARS[t]
    if t == "array":
        items = schema.get("items")
        return list[_hint(items)] if isinstance(items, dict) and items else list
    if t == "object":
        extra = schema.get("additionalProperties")
        return dict[str, _hint(extra)] if isinstance(extra, dict) and extra else dict
    return Any


def _union(hints: list[Any]) -> Any:
    unique = list(dict.fromkeys(hints))
    return unique[0] if len(unique) == 1 else Union[tuple(unique)]


# ---- exact schemas ------------------------------------------------------------------------------------------
def _install_exact_schemas() -> bool:
    """Make transformers' ``get_json_schema`` answer our tool methods with the env's own schema (a copy);
    every other function is read from its hints and docstring as before. Type hints cannot say all that
    JSON Schema says (a ``default``, nested ``properties``, ``minimum``, ``format`` ...), and the schema
    the chat template renders, the one TRL's response parser types arguments with and the one TRL sends
    a vLLM server all come from ``get_json_schema``. It is rebound in every loaded module that holds it
    (``from ... import get_json_schema``); modules loaded later import the new one. Done when this module
    is imported (and again, idempotently, by :func:`trl_environment_factory`)."""
    import transformers.utils.chat_template_utils as ctu

    original = ctu.get_json_schema
    if getattr(original, _PATCHED, False):
        return True

    @functools.wraps(original)
    def get_json_schema(func: Callable) -> dict:
        schema = getattr(func, _SCHEMA_ATTR, None)
        return copy.deepcopy(schema) if isinstance(schema, dict) else original(func)

    setattr(get_json_schema, _PATCHED, True)
    for mod in list(sys.modules.values()):  # through __dict__: getattr would wake transformers' lazy modules
        d = getattr(mod, "__dict__", None)
        if isinstance(d, dict) and d.get("get_json_schema") is original:
            d["get_json_schema"] = get_json_schema
    return ctu.get_json_schema is get_json_schema


_install_exact_schemas()  # at import, so code that reads get_json_schema after importing us sees it


def _original_get_json_schema() -> Callable[[Callable], dict]:
    """transformers' own ``get_json_schema`` (what hints and a docstring say), patched or not."""
    import transformers.utils.chat_template_utils as ctu

    f = ctu.get_json_schema
    return f.__wrapped__ if getattr(f, _PATCHED, False) else f


def _expressible(schema: dict[str, Any]) -> dict[str, Any]:
    """The part of a tool schema that hints and a docstring can carry (``get_json_schema`` drops a
    property's ``default`` and an empty ``required``)."""
    out = copy.deepcopy(as_openai_tool(schema))
    params = out["function"].get("parameters") or {}
    for p in (params.get("properties") or {}).values():
        if isinstance(p, dict):
            p.pop("default", None)
    if "required" in params and not params["required"]:
        del params["required"]
    return out


# ---- the factory ---------------------------------------------------------------------------------------------
class TRLEnvironmentFactory:
    """A zero-argument callable that makes one TRL environment (what ``environment_factory`` takes)."""

    def __init__(self, cls: type, shared: _Shared, tools: list[dict[str, Any]]):
        self._cls, self._shared, self.tools = cls, shared, tools

    def __call__(self) -> _TRLEnvironment:
        return self._cls(self._shared)

    @property
    def env_id(self) -> str:
        return self._shared.env_id

    @property
    def stats(self) -> dict[str, int]:
        """Counters of the episodes played (shared by the factories of one :func:`trl_environment_factory` call):
        resets, steps (tool calls and final answers sent to the env), episodes (scored), unfinished, env_errors."""
        return dict(self._shared.stats)

    def close(self) -> None:
        """Close the idle gym envs (for lopd/remote-v0, their server sessions)."""
        self._shared.close()

    def __repr__(self) -> str:
        return f"<TRL environment factory {self._cls.__name__} of {self.env_id}>"


def trl_environment_factory(env_id: str, *, exact_schemas: bool = True,
                            **env_kwargs: Any) -> TRLEnvironmentFactory | dict[str, TRLEnvironmentFactory]:
    """What ``GRPOTrainer(environment_factory=...)`` takes for ``gymnasium.make(env_id, **env_kwargs)``.

    One factory when every task has the same tools; else a dict, one factory per tool set, keyed by the
    ``environment`` column of :func:`trl_dataset`. ``exact_schemas``: the model sees each tool as the
    env describes it (see :func:`_install_exact_schemas`); False leaves transformers' reading of the
    generated hints and docstrings, which drops what hints cannot say (a warning names such tools)."""
    plan = _plan(env_id, env_kwargs)
    shared = _Shared(env_id, env_kwargs)
    with _PLANS_LOCK:
        while plan.spare:
            shared.release(plan.spare.pop())
    if exact_schemas and not _install_exact_schemas():
        warnings.warn("transformers has no get_json_schema to answer with the env's schemas: the model sees "
                      "what the generated hints and docstrings say", stacklevel=2)
    factories = {}
    lossy: list[str] = []
    read = _original_get_json_schema()
    for key, tools in plan.toolsets.items():
        cls = _environment_class(env_id, key, tools, exact_schemas)
        if not exact_schemas:
            lossy += [t["function"]["name"] for t in tools if _read_or_none(read, getattr(cls, t["function"]["name"]))
                      != _expressible(t)]
        factories[_env_name(env_id, key)] = TRLEnvironmentFactory(cls, shared, tools)
    if lossy:
        warnings.warn(f"{env_id}: {len(lossy)} tool schema(s) lose detail as type hints and docstrings "
                      f"(e.g. {sorted(set(lossy))[:5]}); exact_schemas=True keeps them", stacklevel=2)
    return next(iter(factories.values())) if len(factories) == 1 else factories


def _read_or_none(read: Callable[[Callable], dict], fn: Callable) -> dict | None:
    try:
        return read(fn)
    except Exception:  # noqa: BLE001 - transformers refuses some docstrings; that is a loss too
        return None


# ---- the reward ----------------------------------------------------------------------------------------------
def trl_env_reward(completions: list[Any], environments: list[Any] | None = None,
                   log_metric: Callable[[str, float], None] | None = None, **kwargs: Any) -> list[float | None]:
    """``reward_funcs`` for :func:`trl_environment_factory`: each rollout's final answer goes to its env,
    whose verifier gives the reward (0.0 for a rollout the env did not end). None for a rollout of an
    environment that is not ours (TRL then leaves this function out of its reward)."""
    if environments is None:
        raise ValueError("trl_env_reward reads the env of each rollout: pass "
                         "environment_factory=trl_environment_factory(...) to GRPOTrainer")
    if len(environments) != len(completions):
        raise ValueError(f"{len(completions)} completions but {len(environments)} environments")
    rewards = [env._score(c) if isinstance(env, _TRLEnvironment) else None
               for env, c in zip(environments, completions)]
    ours = [env for env in environments if isinstance(env, _TRLEnvironment)]
    if log_metric is not None and ours:
        log_metric("lopd/unfinished", sum(e._status == "unfinished" for e in ours) / len(ours))
        log_metric("lopd/env_errors", sum(e._status == "env_error" for e in ours) / len(ours))
    return rewards
