"""Token-in/token-out multi-turn rollouts: the training sequence is exactly what the engine saw."""
import gymnasium as gym
import pytest
import torch

import envs  # noqa: F401  (registers lopd/* ids)
from envs.examples.shop import ShopEnv
from envs.protocol import render_tool_call
from envs.trace import Episode
from harness.engines import Engine, HFEngine, SamplingParams
from harness.models import build_tiny_model
from harness.rollout import RolloutConfig, episode_tokens, render_observation, rollout
from rollout_fixtures import ScriptedEngine


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny():
    return build_tiny_model("1m", seed=0)


def char_by_char(tok, text):
    """A valid but non-canonical tokenisation: re-tokenising its text gives other ids."""
    return [i for ch in text for i in tok.encode(ch, add_special_tokens=False)]


def call(name, **args):
    return render_tool_call(name, args)


SCRIPT = [
    call("price", item="apple"), call("add_to_cart", item="apple", qty=1), call("price", item="milk"),
    call("add_to_cart", item="apple", qty=1), call("price", item="pear"),
    call("price", item="banana"),                                   # the tool raises: error observation
    call("price", item="apple") + "\n" + call("price", item="pear"),  # two calls, two tool messages
    call("checkout"), call("price", item="milk"), "All done: 2 apples, paid 4.",
]


def test_ten_turn_episode_has_no_drift_and_an_exact_mask(tiny):
    _, tok = tiny
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    turns = [char_by_char(tok, text) + [im_end] for text in SCRIPT]
    engine = ScriptedEngine(turns, eos=[im_end])
    env = gym.make("lopd/shop-v0")
    (traj,) = rollout([env], engine, tok, seeds=[0], options=[{"task_id": "apples"}])
    ep = traj.episode
    assert len(ep.steps) == 10 and ep.terminated and ep.reward == 1.0 and ep.env_id == "lopd/shop-v0"
    # The env saw the decoded text; the sequence kept the sampled ids, which re-tokenise differently.
    assert [s.text for s in ep.steps] == SCRIPT
    assert [s.token_ids for s in ep.steps] == turns
    assert any(tok.encode(s.text, add_special_tokens=False) != s.token_ids[:-1] for s in ep.steps)
    # The sequence is prompt + (sampled + observation) per turn, and every turn's engine input is
    # exactly the sequence so far.
    expected = list(ep.prompt_token_ids)
    for t, step in enumerate(ep.steps):
        assert engine.prompts[t] == [expected]
        expected += step.token_ids + step.observation_token_ids
    assert traj.token_ids == expected
    assert ep.steps[-1].observation_token_ids == []
    # Observations render the tool messages as the chat template's delta (the sampled <|im_end|>
    # is not repeated).
    obs0 = tok.decode(ep.steps[0].observation_token_ids)
    assert obs0 == "\n<|im_start|>user\n<tool_response>\n2\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    obs6 = tok.decode(ep.steps[6].observation_token_ids)
    assert obs6.count("<tool_response>") == 2 and obs6.count("<|im_start|>user") == 1
    assert "Error" in tok.decode(ep.steps[5].observation_token_ids)
    # At the text level the context equals the template's rendering of the conversation.
    last_prompt = engine.prompts[-1][0]
    assert tok.decode(last_prompt) == tok.apply_chat_template(ep.messages[:-1], tokenize=False,
                                                              add_generation_prompt=True)
    # Loss mask: exactly the sampled tokens, end-of-turn tokens of assistant turns included.
    mask = traj.loss_mask
    assert len(mask) == len(traj.token_ids) and sum(mask) == sum(len(t) for t in turns)
    pos = len(ep.prompt_token_ids)
    for step in ep.steps:
        assert mask[pos:pos + len(step.token_ids)] == [1] * len(step.token_ids)
        pos += len(step.token_ids)
        assert mask[pos:pos + len(step.observation_token_ids)] == [0] * len(step.observation_token_ids)
        pos += len(step.observation_token_ids)
    ends = [m for t, m in zip(traj.token_ids, mask) if t == im_end]
    assert ends.count(1) == 10  # one per assistant turn
    assert ends.count(0) == 2 + 9  # system, user, and the nine tool turns
    assert all(m == 0 for m in mask[:len(ep.prompt_token_ids)])
    assert [lp for lp, m in zip(traj.logprobs, mask) if m] == [-0.5] * sum(mask)
    # The stored Episode alone rebuilds the same training view, also after a JSON round trip.
    again = Episode.from_json(ep.to_json())
    assert episode_tokens(again) == (traj.token_ids, traj.loss_mask, traj.logprobs)


def test_turn_cut_by_length_gets_its_end_marker_from_the_template(tiny):
    _, tok = tiny
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    cut = char_by_char(tok, call("price", item="apple"))  # no <|im_end|>: hit max_new_tokens
    engine = ScriptedEngine([cut, char_by_char(tok, "ok") + [im_end]], eos=[im_end])
    (traj,) = rollout([gym.make("lopd/shop-v0")], engine, tok, seeds=[0], options=[{"task_id": "apples"}])
    obs = traj.episode.steps[0].observation_token_ids
    assert obs[0] == im_end  # closed by the template, and not supervised
    start = len(traj.episode.prompt_token_ids) + len(cut)
    assert traj.token_ids[start] == im_end and traj.loss_mask[start] == 0
    assert traj.loss_mask[start - 1] == 1


def test_render_observation_user_reply(tiny):
    _, tok = tiny
    ids = render_observation(tok, [{"role": "user", "content": "Error: no tool call found in the response."}])
    assert tok.decode(ids) == ("<|im_end|>\n<|im_start|>user\nError: no tool call found in the response."
                               "<|im_end|>\n<|im_start|>assistant\n")


class ChattyShop(ShopEnv):
    """A reply without a tool call does not end the episode, so a random model plays 10 turns."""

    end_on_no_call = False
    max_steps = 10


class Recording(Engine):
    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def generate(self, prompts, params=None, overrides=None):
        outs = self.inner.generate(prompts, params, overrides)
        self.calls.append(([list(p) for p in prompts], outs))
        return outs

    def score(self, *a, **k):
        return self.inner.score(*a, **k)

    def update_weights(self, source):
        self.inner.update_weights(source)

    @property
    def eos_token_ids(self):
        return self.inner.eos_token_ids


def test_hf_engine_ten_turns_batched_with_kv_reuse(tiny):
    model, tok = tiny
    engine = Recording(HFEngine(model, tok))
    envs_ = [ChattyShop(), ChattyShop()]
    trajs = rollout(envs_, engine, tok, seeds=[0, 1],
                    sampling=SamplingParams(temperature=1.0, top_k=50, max_new_tokens=12, seed=3),
                    config=RolloutConfig(max_turns=30))
    assert len(engine.calls) == 10
    for turn, (prompts, outs) in enumerate(engine.calls):
        for i, (p, o) in enumerate(zip(prompts, outs)):
            assert trajs[i].token_ids[:len(p)] == p  # the engine's context is the training prefix
            if turn:
                assert o.cached_prompt_tokens > 0  # later turns only prefill the new tokens
    for traj in trajs:
        ep = traj.episode
        assert len(ep.steps) == 10 and ep.truncated and not ep.terminated
        assert episode_tokens(ep) == (traj.token_ids, traj.loss_mask, traj.logprobs)
        assert sum(traj.loss_mask) == sum(len(s.token_ids) for s in ep.steps)
        # Teacher-forced log-probs of the final sequence equal the sampling log-probs at every
        # supervised token: no drift between what was sampled and what is trained on.
        sc = engine.score([traj.token_ids], top_k=0, start=1)[0]
        sup = torch.tensor(traj.loss_mask[1:], dtype=torch.bool)
        assert torch.allclose(sc.token_logprobs[sup], torch.tensor(traj.logprobs[1:])[sup], atol=1e-4)
