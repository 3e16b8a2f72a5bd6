"""Token-in/token-out multi-turn rollouts: play tool-use envs with an engine, batched.

A trajectory's training sequence is exactly::

    prompt tokens | sampled tokens (turn 1) | observation tokens | sampled tokens (turn 2) | ...

where the sampled tokens are the engine's ids as generated and the observation tokens are the
chat template's rendering of what the env answered (tool responses, the next generation prompt).
Decoded text goes to the env, but is never tokenised back into the sequence. The engine sees
the same growing sequence every turn, so an engine with prefix reuse (the HF engine, SGLang's
radix cache) only prefills the new observation tokens.

The loss mask supervises every sampled token, the end-of-turn token included; prompt (system,
user) and observation (tool) tokens are masked::

    envs = [gymnasium.make("lopd/shop-v0") for _ in range(8)]
    trajs = rollout(envs, engine, tokenizer, sampling=SamplingParams(temperature=0.7, top_p=0.95,
                    top_k=20, max_new_tokens=512), seeds=range(8))
    trajs[0].token_ids, trajs[0].loss_mask, trajs[0].episode      # episode: envs.trace.Episode

:func:`episode_tokens` rebuilds ``(token_ids, loss_mask, logprobs)`` from a stored Episode.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from envs.trace import Episode, Step
from harness.config import PosInt
from harness.engines.base import EmbedOverride, Engine, EngineError, SamplingParams, row_seed

_MARK = "\u2063LOPD_ASSISTANT_TURN\u2063"  # a string no template alters, to cut the observation delta


@dataclass
class RolloutConfig:
    """Limits and template options of a rollout."""

    max_turns: PosInt = 30
    """Most assistant turns per episode (the env's own max_steps usually ends it first)."""
    max_context_tokens: PosInt = 32768
    """An episode whose next turn could exceed this many tokens is truncated."""
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra chat-template variables, e.g. {"enable_thinking": False} for Qwen3."""
    env_step_errors_end_episode: bool = True
    """An env that raises in step() (breaking its contract) ends the episode instead of the run."""


@dataclass
class Trajectory:
    """One episode in training form."""

    episode: Episode
    token_ids: list[int]
    """Prompt, then per turn the sampled ids and the observation ids."""
    loss_mask: list[int]
    """1 on sampled tokens (end-of-turn token included), 0 on prompt and observation tokens."""
    logprobs: list[float]
    """Sampling log-prob on supervised positions, 0.0 elsewhere."""
    prompt_override: EmbedOverride | None = None
    """Embedding override applied to the prompt (privileged latents), if any."""


def render_prompt(tokenizer: Any, messages: list[dict[str, Any]], **template_kwargs: Any) -> list[int]:
    """Token ids of the conversation so far plus the assistant generation prompt."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **template_kwargs)
    return list(tokenizer.encode(text, add_special_tokens=False))


def render_observation(tokenizer: Any, messages: list[dict[str, Any]], **template_kwargs: Any) -> list[int]:
    """Tokens that follow an assistant turn: its end-of-turn marker, the rendered ``messages``
    (tool responses, a user reply) and the next assistant generation prompt.

    Rendered as the delta of the chat template after an assistant message, e.g. for Qwen3
    ``<|im_end|>\\n<|im_start|>user\\n<tool_response>\\n...\\n</tool_response><|im_end|>\\n<|im_start|>assistant\\n``.
    The caller drops the leading end-of-turn token when the model already sampled it.
    """
    convo = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
             {"role": "assistant", "content": _MARK}] + list(messages)
    text = tokenizer.apply_chat_template(convo, tokenize=False, add_generation_prompt=True, **template_kwargs)
    at = text.find(_MARK)
    if at < 0:
        raise EngineError("the chat template did not render the assistant message verbatim")
    return list(tokenizer.encode(text[at + len(_MARK):], add_special_tokens=False))


def observation_messages(step_messages: list[dict[str, Any]], observation: str) -> list[dict[str, Any]]:
    """The non-assistant messages an env step produced; a bare observation string (e.g. an error
    without any tool message) becomes a user message."""
    msgs = [m for m in step_messages if m.get("role") != "assistant"]
    if not msgs and observation:
        msgs = [{"role": "user", "content": observation}]
    return msgs


def episode_tokens(episode: Episode) -> tuple[list[int], list[int], list[float]]:
    """(token_ids, loss_mask, logprobs) of a rollout Episode, rebuilt from its stored ids."""
    if episode.prompt_token_ids is None:
        raise ValueError("episode has no prompt_token_ids (not produced by a token-in/token-out rollout)")
    ids = list(episode.prompt_token_ids)
    mask = [0] * len(ids)
    lps = [0.0] * len(ids)
    for s in episode.steps:
        if s.token_ids is None:
            raise ValueError(f"step {s.index} has no token_ids")
        ids += s.token_ids
        mask += [1] * len(s.token_ids)
        lps += list(s.logprobs) if s.logprobs is not None else [0.0] * len(s.token_ids)
        obs = s.observation_token_ids or []
        ids += obs
        mask += [0] * len(obs)
        lps += [0.0] * len(obs)
    return ids, mask, lps


@dataclass
class _Live:
    env: Any
    episode: Episode
    ids: list[int]
    mask: list[int]
    lps: list[float]
    override: EmbedOverride | None
    done: bool = False


def _env_id(env: Any) -> str:
    served = getattr(getattr(env, "unwrapped", env), "env_id", None)  # lopd/remote-v0 names the env it plays
    if isinstance(served, str) and served:
        return served
    spec = getattr(env, "spec", None)
    return getattr(spec, "id", None) or type(getattr(env, "unwrapped", env)).__name__


def rollout(envs: Sequence[Any], engine: Engine, tokenizer: Any, *, sampling: SamplingParams | None = None,
            seeds: Sequence[int | None] | None = None, options: Sequence[dict[str, Any] | None] | None = None,
            config: RolloutConfig | None = None,
            build_prompt: Callable[[list[dict[str, Any]]], tuple[list[int], EmbedOverride | None]] | None = None,
            meta: dict[str, Any] | None = None) -> list[Trajectory]:
    """Play one episode in each env, all envs batched through ``engine`` turn by turn.

    ``seeds``/``options`` go to each ``env.reset``; ``sampling.seed`` (if set) is mixed with the
    turn index so turns do not repeat random streams. ``build_prompt`` may replace the first
    prompt's tokens (and give an embedding override, e.g. latent context); by default the env's
    messages go through the chat template. Returns one :class:`Trajectory` per env, in order.
    """
    cfg = config or RolloutConfig()
    base = (sampling or SamplingParams()).validate()
    seeds, options = _per_env(len(envs), seeds, options)
    eos = set(engine.eos_token_ids) | set(base.stop_token_ids)
    live: list[_Live] = []
    for env, seed, opt in zip(envs, seeds, options):
        _, info = env.reset(seed=seed, options=opt)
        messages = copy.deepcopy(info.get("messages", []))
        if build_prompt is not None:
            ids, ov = build_prompt(messages)
        else:
            ids, ov = render_prompt(tokenizer, messages, **cfg.template_kwargs), None
        ep = Episode(env_id=_env_id(env), task_id=str(info.get("task_id", "")), split=str(info.get("split", "train")),
                     seed=seed, messages=messages, tools=copy.deepcopy(info.get("tools", [])),
                     prompt_token_ids=list(ids), meta=dict(meta or {}))
        ep.timings = {"generate": 0.0, "env": 0.0}
        live.append(_Live(env, ep, list(ids), [0] * len(ids), [0.0] * len(ids), ov))
    wall = time.perf_counter()
    for turn in range(cfg.max_turns):
        todo = [x for x in live if not x.done]
        for x in todo:
            if len(x.ids) + base.max_new_tokens > cfg.max_context_tokens:
                _finish(x, truncated=True, why="context_limit")
        todo = [x for x in todo if not x.done]
        if not todo:
            break
        params = base if base.seed is None else replace(base, seed=base.seed * 1_000_003 + turn)
        t0 = time.perf_counter()
        outs = engine.generate([x.ids for x in todo], params, [x.override for x in todo])
        t_gen = time.perf_counter() - t0
        for x, out in zip(todo, outs):
            _play_turn(x, out, tokenizer, cfg, eos, t_gen)
    for x in live:
        if not x.done:
            _finish(x, truncated=True, why="max_turns")
        x.episode.timings["wall"] = time.perf_counter() - wall
    return [Trajectory(x.episode, x.ids, x.mask, x.lps, x.override) for x in live]


def rollout_in_flight(envs: Sequence[Any], engine: Engine, tokenizer: Any, *, sampling: SamplingParams | None = None,
                      seeds: Sequence[int | None] | None = None, options: Sequence[dict[str, Any] | None] | None = None,
                      config: RolloutConfig | None = None, meta: dict[str, Any] | None = None,
                      workers: int = 256) -> list[Trajectory]:
    """:func:`rollout`, but every episode plays on its own thread, never waiting for the others' turns:
    for server engines, whose continuous batching takes each request as it comes. Episode ``i``
    samples with a seed derived from ``sampling.seed`` and ``i`` alone, so results do not depend on
    scheduling."""
    from concurrent.futures import ThreadPoolExecutor

    base = (sampling or SamplingParams()).validate()
    n = len(envs)
    seeds, options = _per_env(n, seeds, options)
    tok = tokenizer if isinstance(tokenizer, LockedTokenizer) else LockedTokenizer(tokenizer)

    def one(i: int) -> Trajectory:
        return rollout([envs[i]], engine, tok, sampling=replace(base, seed=row_seed(base.seed, i)), seeds=[seeds[i]],
                       options=[options[i]], config=config, meta=meta)[0]

    with ThreadPoolExecutor(max(1, min(workers, n)), thread_name_prefix="episode") as ex:
        return list(ex.map(one, range(n)))


class LockedTokenizer:
    """A tokenizer shared by rollout threads: one call at a time (fast tokenizers are not reentrant)."""

    def __init__(self, tok: Any):
        self._tok, self._lock = tok, threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._tok, name)
        if not callable(attr):
            return attr

        def locked(*a: Any, **k: Any) -> Any:
            with self._lock:
                return attr(*a, **k)
        return locked


def _per_env(n: int, seeds: Sequence[int | None] | None,
             options: Sequence[dict[str, Any] | None] | None) -> tuple[list[Any], list[Any]]:
    seeds = list(seeds) if seeds is not None else [None] * n
    options = list(options) if options is not None else [None] * n
    if len(seeds) != n or len(options) != n:
        raise ValueError("seeds and options need one entry per env")
    return seeds, options


def _play_turn(x: _Live, out: Any, tokenizer: Any, cfg: RolloutConfig, eos: set[int], t_gen: float) -> None:
    ep = x.episode
    text = tokenizer.decode(out.token_ids, skip_special_tokens=True)
    t0 = time.perf_counter()
    try:
        _, reward, terminated, truncated, info = x.env.step(text)
    except Exception as e:  # an env must not raise; keep the run alive and say why
        if not cfg.env_step_errors_end_episode:
            raise
        step = Step(index=len(ep.steps), text=text, token_ids=list(out.token_ids), logprobs=list(out.logprobs),
                    observation_token_ids=[], timings={"generate": t_gen, "env": time.perf_counter() - t0})
        ep.steps.append(step)
        ep.messages.append({"role": "assistant", "content": text})
        x.ids += out.token_ids
        x.mask += [1] * len(out.token_ids)
        x.lps += list(out.logprobs)
        _finish(x, truncated=True, why=f"env_error: {type(e).__name__}: {e}"[:300])
        return
    t_env = time.perf_counter() - t0
    step = info.get("step")
    step = copy.deepcopy(step) if isinstance(step, Step) else Step(index=len(ep.steps), text=text,
                                                                    reward=float(reward))
    step.token_ids, step.logprobs = list(out.token_ids), list(out.logprobs)
    step.timings = {**step.timings, "generate": t_gen, "env": t_env}
    step_msgs = copy.deepcopy(info.get("messages", [{"role": "assistant", "content": text}]))
    ep.messages.extend(step_msgs)
    ep.timings["generate"] += t_gen
    ep.timings["env"] += t_env
    x.ids += out.token_ids
    x.mask += [1] * len(out.token_ids)
    x.lps += list(out.logprobs)
    if terminated or truncated:
        step.observation_token_ids = []
        ep.steps.append(step)
        ep.reward = float(info.get("final_reward", reward))
        ep.terminated, ep.truncated = bool(terminated), bool(truncated)
        x.done = True
        return
    obs = render_observation(tokenizer, observation_messages(step_msgs, step.observation), **cfg.template_kwargs)
    if out.token_ids and obs and out.token_ids[-1] == obs[0] and obs[0] in eos:
        obs = obs[1:]  # the model already closed its turn with the template's end-of-turn token
    step.observation_token_ids = obs
    ep.steps.append(step)
    x.ids += obs
    x.mask += [0] * len(obs)
    x.lps += [0.0] * len(obs)


def _finish(x: _Live, *, truncated: bool, why: str) -> None:
    x.done = True
    x.episode.truncated = truncated
    x.episode.meta["stop"] = why
