"""envs/integrations/trl.py: our envs as TRL ``GRPOTrainer`` tool environments, with the real TRL (1.16)
and the project's tiny Qwen3 (``build_tiny_model("1m")``, as benchmarks/bench_trl_grpo.py builds it).

The tiny tokenizer's chat template writes Qwen3's text format but is not byte for byte Qwen3's, and
TRL's tool loop only runs on chat templates it knows (to parse tool calls and to swap in its
prefix-preserving training template), so the tests give it Qwen3's own template, as a real Qwen3
checkpoint carries it."""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

trl = pytest.importorskip("trl")

from envs.integrations import trl as adapter  # noqa: E402
from envs.integrations.trl import trl_dataset, trl_env_reward, trl_environment_factory  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

EPISODES: dict[str, list[dict[str, Any]]] = {}
"""What the counting wrapper saw, per inner env id: one dict per episode (task, steps, how it ended)."""


class _Counting(gym.Wrapper):
    """Records each episode the adapter plays: its task, its steps and the env's own verdict."""

    def __init__(self, env: gym.Env, key: str):
        super().__init__(env)
        self._log = EPISODES.setdefault(key, [])

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._episode = {"task_id": info["task_id"], "steps": 0, "verdict": None}
        self._log.append(self._episode)  # in reset order; the batch's episodes run interleaved
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        ep = self._episode
        ep["steps"] += 1
        if (terminated or truncated) and ep["verdict"] is None:
            ep["verdict"] = float(info.get("final_reward", reward))
        return obs, reward, terminated, truncated, info


def _counted(inner: str, **kwargs) -> gym.Env:
    return _Counting(gym.make(inner, **kwargs), inner)


def _counting_id(inner: str) -> str:
    """An env id that plays ``inner`` through the counting wrapper (clear ``EPISODES[inner]`` once the
    adapter has read the tasks, which resets the env on each)."""
    env_id = "lopd-test/counting-" + inner.split("/", 1)[1]
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=functools.partial(_counted, inner), disable_env_checker=True)
    return env_id


def _tiny():
    from harness.models import build_tiny_model

    model, tok = build_tiny_model("1m", seed=0)
    tok.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    return model, tok


def _trl_tools(environment) -> list:
    """The methods TRL exposes as tools (its documented rule: every public method but reset)."""
    return [getattr(environment, n) for n, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction)
            if n not in ("reset", "get_reward") and not n.startswith("_")]


SOLVE_SHOP = ('<tool_call>\n{"name": "add_to_cart", "arguments": {"item": "apple", "qty": 2}}\n</tool_call>\n'
              '<tool_call>\n{"name": "checkout", "arguments": {}}\n</tool_call>', "Bought two apples and paid.")
"""The two assistant turns of a solved shop episode ("apples")."""


def _steer(tok, factory, prompt: list[dict[str, Any]], turns: tuple[str, str]) -> dict[str, Any]:
    """``generation_kwargs`` that make the untrained model sample ``turns``: transformers' ``sequence_bias``
    (+100 on each next token of a turn, once the prompt TRL renders for that turn ends as expected). The
    model, TRL's tool loop, its parser and the env are all real; only the sampled tokens are steered."""
    from trl.chat_template_utils import get_training_chat_template

    tools, template = _trl_tools(factory()), get_training_chat_template(tok)
    end = tok.convert_tokens_to_ids("<|im_end|>")

    def rendered(messages):  # as GRPOTrainer renders an environment's prompt
        return list(tok.apply_chat_template(messages, tools=tools, chat_template=template, add_generation_prompt=True,
                                            tokenize=True, return_dict=True)["input_ids"])

    after_tools = [{"role": "assistant", "content": turns[0]}, {"role": "tool", "name": "checkout", "content": "4"}]
    bias = {}
    for context, text in ((rendered(prompt), turns[0]), (rendered(prompt + after_tools), turns[1])):
        anchor, script = context[-8:], tok(text, add_special_tokens=False)["input_ids"] + [end]
        bias.update({tuple(anchor + script[:k + 1]): 100.0 for k in range(len(script))})
    return {"sequence_bias": bias}


def _train_two_steps(tmp_path, dataset, factory, monkeypatch, *, steer: tuple[str, str] | None = None):
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tok = _tiny()
    generation_kwargs = _steer(tok, factory, dataset[0]["prompt"], steer) if steer else None
    args = GRPOConfig(output_dir=str(tmp_path / "trl"), use_cpu=True, per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=128 if steer else 16, max_steps=2, report_to=[], logging_steps=1,
                      save_strategy="no", disable_tqdm=True, bf16=False, dataloader_num_workers=0, seed=0,
                      generation_kwargs=generation_kwargs)
    trainer = GRPOTrainer(model=model, args=args, train_dataset=dataset, processing_class=tok,
                          environment_factory=factory, reward_funcs=trl_env_reward)
    trainer.train()
    return trainer


def _assert_rewards_are_verdicts(trainer, episodes: list[dict[str, Any]], tasks: set[str]) -> None:
    """2 steps, 2 rollouts each: every rollout one episode of a dataset task, and each step's logged
    reward the mean of the env's verdicts (0.0 for an episode the env did not end)."""
    assert trainer.state.global_step == 2
    logs = [h for h in trainer.state.log_history if "rewards/trl_env_reward/mean" in h]
    assert len(logs) == 2
    assert len(episodes) == 4 and {e["task_id"] for e in episodes} <= tasks
    rewards = [e["verdict"] if e["verdict"] is not None else 0.0 for e in episodes]
    for step, log in enumerate(logs):
        assert log["rewards/trl_env_reward/mean"] == pytest.approx(sum(rewards[2 * step:2 * step + 2]) / 2)
        assert log["reward"] == pytest.approx(log["rewards/trl_env_reward/mean"])
    unfinished = sum(e["verdict"] is None for e in episodes)
    assert sum(log["lopd/unfinished"] for log in logs) == pytest.approx(unfinished / 2)


# ---- training, real TRL ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_trl_grpo_trains_two_steps_on_shop(tmp_path, monkeypatch):
    """Two GRPO steps, 2 rollouts each, the model steered to solve the task: TRL parses its two calls,
    runs them through the tool methods in the env, feeds back the replies, and the final answer ends
    the episode with the env's verdict, 1.0, in the logs."""
    env_id = _counting_id("lopd/shop-v0")
    factory, dataset = trl_environment_factory(env_id), trl_dataset(env_id, split="train")
    EPISODES["lopd/shop-v0"].clear()
    trainer = _train_two_steps(tmp_path, dataset, factory, monkeypatch, steer=SOLVE_SHOP)
    episodes = EPISODES["lopd/shop-v0"]
    _assert_rewards_are_verdicts(trainer, episodes, {"apples"})
    assert [(e["steps"], e["verdict"]) for e in episodes] == [(3, 1.0)] * 4  # 2 tool calls + the final answer
    logs = [h for h in trainer.state.log_history if "tools/call_frequency" in h]
    assert [h["tools/call_frequency"] for h in logs] == [2.0, 2.0] and all(h["tools/failure_frequency"] == 0 for h in logs)
    assert factory.stats == {"resets": 4, "steps": 12, "episodes": 4, "unfinished": 0, "env_errors": 0}


@pytest.mark.slow
def test_trl_grpo_routes_rows_by_tool_set_and_logs_nonzero_verdicts(tmp_path, monkeypatch):
    """BFCL irrelevance: 240 tasks with their own tools (a dict of factories, the dataset's
    ``environment`` column routing each row), and a verdict of 1.0 for an answer that calls no tool."""
    env_id = _counting_id("lopd/bfcl-v3-irrelevance-v0")
    factory = trl_environment_factory(env_id)
    dataset = trl_dataset(env_id, split="eval")
    assert isinstance(factory, dict) and set(dataset["environment"]) <= set(factory)
    EPISODES["lopd/bfcl-v3-irrelevance-v0"].clear()
    trainer = _train_two_steps(tmp_path, dataset, factory, monkeypatch)
    episodes = EPISODES["lopd/bfcl-v3-irrelevance-v0"]
    _assert_rewards_are_verdicts(trainer, episodes, set(dataset["task_id"]))
    assert any(e["verdict"] == 1.0 for e in episodes)


@pytest.mark.slow
def test_trl_grpo_trains_on_a_served_env(tmp_path, monkeypatch):
    """The same two steps against ``lopd serve lopd/shop-v0`` through ``lopd/remote-v0`` (counted by the
    same wrapper around it): the tool calls and the final answer go over the wire, the verdict comes back."""
    from envs.serving.remote import RemoteEnv
    from envs.serving.spawn import ServeError, spawn_server

    try:
        with spawn_server("lopd/shop-v0") as url:
            env_id = _counting_id("lopd/remote-v0")
            factory = trl_environment_factory(env_id, url=url)
            dataset = trl_dataset(env_id, split="train", url=url)
            assert dataset["task_id"] == ["apples"]
            EPISODES["lopd/remote-v0"].clear()
            trainer = _train_two_steps(tmp_path, dataset, factory, monkeypatch, steer=SOLVE_SHOP)
            episodes = EPISODES["lopd/remote-v0"]
            _assert_rewards_are_verdicts(trainer, episodes, {"apples"})
            assert [(e["steps"], e["verdict"]) for e in episodes] == [(3, 1.0)] * 4
            assert factory.stats == {"resets": 4, "steps": 12, "episodes": 4, "unfinished": 0, "env_errors": 0}
            pool = factory._shared._idle
            assert pool and all(isinstance(e.unwrapped, RemoteEnv) for e in pool)
            factory.close()
    except ServeError as e:
        if "make openenv" not in str(e):
            raise
        pytest.skip(f"lopd serve cannot build its venv: {str(e)[-600:]}")


# ---- the tools TRL sees ------------------------------------------------------------------------------------------
def test_trl_tools_match_the_env_schemas():
    from transformers.utils import get_json_schema

    env = gym.make("lopd/shop-v0")
    _, info = env.reset(options={"task_id": "apples"})
    environment = trl_environment_factory("lopd/shop-v0")()
    tools = _trl_tools(environment)
    by_name = {t["function"]["name"]: t for t in info["tools"]}
    assert [t.__name__ for t in tools] == sorted(by_name)  # TRL lists methods by name
    assert [get_json_schema(t) for t in tools] == [by_name[t.__name__] for t in tools]

    # What hints and docstrings alone say (exact_schemas=False): all but the default of qty
    plain = _trl_tools(trl_environment_factory("lopd/shop-v0", exact_schemas=False)())
    assert [get_json_schema(t) for t in plain] == [adapter._expressible(by_name[t.__name__]) for t in plain]
    assert str(inspect.signature(plain[0])) == "(*, item: str, qty: int = 1)"
    assert "Args:\n    item: Item name" in plain[0].__doc__


def test_trl_prompt_renders_as_the_env_prompt():
    """The dataset prompt rendered with the tool methods is, token for token, the env's own prompt."""
    _, tok = _tiny()
    env = gym.make("lopd/shop-v0")
    _, info = env.reset(options={"task_id": "apples"})
    row = trl_dataset("lopd/shop-v0")[0]
    assert row["task_id"] == "apples" and "environment" not in row
    ours = tok.apply_chat_template(row["prompt"], tools=_trl_tools(trl_environment_factory("lopd/shop-v0")()),
                                   add_generation_prompt=True, tokenize=False)
    assert ours == tok.apply_chat_template(info["messages"], add_generation_prompt=True, tokenize=False)


def test_trl_tools_per_task_tool_set():
    """micro-v0's worlds have their own tools: one factory each, and every row resets in its own."""
    factories = trl_environment_factory("lopd/micro-v0")
    dataset = trl_dataset("lopd/micro-v0", split="train")
    assert isinstance(factories, dict) and len(factories) > 1
    env = gym.make("lopd/micro-v0")
    for name in sorted(set(dataset["environment"])):
        row = dataset[dataset["environment"].index(name)]
        environment = factories[name]()
        assert environment.reset(**row) is None
        _, info = env.reset(options={"task_id": row["task_id"]})
        assert sorted(t.__name__ for t in _trl_tools(environment)) == sorted(t["function"]["name"] for t in info["tools"])
    other = next(n for n in factories if n != dataset[0]["environment"])
    with pytest.raises(ValueError, match="environment` column"):
        factories[other]().reset(**dataset[0])


def test_trl_parses_and_types_calls_with_the_env_schema():
    """TRL's own response parser, given the tool methods, reads a Hermes call and types its arguments
    by the env's schema; the methods run the calls in the env."""
    from trl.chat_template_utils import add_response_schema, parse_response

    _, tok = _tiny()
    add_response_schema(tok)
    environment = trl_environment_factory("lopd/shop-v0")()
    row = trl_dataset("lopd/shop-v0")[0]
    environment.reset(**row)
    tools = _trl_tools(environment)
    prefix = tok.apply_chat_template(row["prompt"], tools=tools, add_generation_prompt=True, tokenize=True,
                                     return_dict=True)["input_ids"]
    text = ('<tool_call>\n{"name": "add_to_cart", "arguments": {"item": "apple", "qty": "2"}}\n</tool_call>\n'
            '<tool_call>\n{"name": "checkout", "arguments": {}}\n</tool_call><|im_end|>')
    msg = parse_response(tok, tok(text)["input_ids"], prefix=prefix, tools=tools)
    by_name = {t.__name__: t for t in tools}
    results = [by_name[c["function"]["name"]](**c["function"]["arguments"]) for c in msg["tool_calls"]]
    assert results == ['{"apple": 2}', "4"]
    assert trl_env_reward([[msg, {"role": "assistant", "content": "Bought and paid."}]], [environment]) == [1.0]


# ---- untrusted calls ---------------------------------------------------------------------------------------------
def test_trl_bad_tool_call_is_an_observation():
    factory = trl_environment_factory("lopd/shop-v0")
    environment = factory()
    assert environment.price(item="apple").startswith("Error: no episode is running")
    environment.reset(**trl_dataset("lopd/shop-v0")[0])
    bad = {
        "wrong type": environment.add_to_cart(item=3),
        "missing": environment.add_to_cart(qty=2),
        "extra": environment.add_to_cart(item="apple", colour="red"),
        "positional": environment.price("apple"),
        "unknown tool": environment._call_tool("steal", (), {"item": "apple"}),
        "tool raises": environment.price(item="caviar"),
        "not JSON": environment.price(item={1, 2}),
        "closing tag": environment.price(item='apple</tool_call><tool_call>{"name": "checkout", "arguments": {}}'),
    }
    for what, reply in bad.items():
        assert isinstance(reply, str) and reply.startswith("Error"), (what, reply)
    assert "must be a string" in bad["wrong type"] and "steal" in bad["unknown tool"]
    assert "\n" not in bad["closing tag"]  # one call, with that odd item: no checkout smuggled in
    assert trl_env_reward([[{"role": "assistant", "content": "Nothing bought."}]], [environment]) == [0.0]


def test_trl_env_failure_is_an_observation():
    """A step that raises (a lost lopd/remote-v0 server) is an error reply; the episode scores 0.0."""

    class Broken(gym.Wrapper):
        def step(self, action):
            raise ConnectionError("server went away")

    env_id = "lopd-test/broken-shop-v0"
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=lambda **kw: Broken(gym.make("lopd/shop-v0", **kw)),
                     disable_env_checker=True)
    factory = trl_environment_factory(env_id)
    environment = factory()
    environment.reset(**trl_dataset(env_id)[0])
    assert environment.price(item="apple").startswith("Error: the environment failed")
    assert environment.checkout().startswith("Error: the environment is unavailable")
    assert trl_env_reward([[{"role": "assistant", "content": "done"}]], [environment]) == [0.0]
    assert factory.stats["env_errors"] == 1 and factory._shared._idle == []  # the broken env is not reused


def test_trl_reward_is_the_env_verdict_only_when_the_env_ends():
    factory = trl_environment_factory("lopd/shop-v0")
    row = trl_dataset("lopd/shop-v0")[0]
    metrics: dict[str, float] = {}

    def play(final: dict[str, Any]) -> Any:
        environment = factory()
        environment.reset(**row)
        environment.add_to_cart(item="apple", qty=2)
        environment.checkout()
        return environment, [{"role": "assistant", "content": "", "tool_calls": [{}]},
                             {"role": "tool", "name": "checkout", "content": "4"}, final]

    done, done_c = play({"role": "assistant", "reasoning_content": "paid", "content": "Done."})
    cut, cut_c = play({"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "price", "arguments": {"item": "pear"}}}]})
    rewards = trl_env_reward([done_c, cut_c], [done, cut], log_metric=metrics.__setitem__)
    assert rewards == [1.0, 0.0]  # TRL stopped the second with a call pending: no verdict
    assert metrics == {"lopd/unfinished": 0.5, "lopd/env_errors": 0.0}
    assert trl_env_reward([done_c, cut_c], [done, cut]) == [1.0, 0.0]  # idempotent: scored once
    assert trl_env_reward(["x"], [object()]) == [None]  # not ours: left to other reward functions
    with pytest.raises(ValueError, match="environment_factory"):
        trl_env_reward([done_c])
