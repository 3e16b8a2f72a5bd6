"""Supervised pretraining: rollout-identical encoding, assistant-only mask, length batching, a real fit."""

import random
import sys
from pathlib import Path

import pytest
import torch
from transformers import Qwen3ForCausalLM

from envs.micro.env import MicroEnv
from envs.micro.expert import run_solver
from harness.models import TinyPreset, build_tokenizer, tiny_config
from harness.basemodel.pretrain import (
    Example, PretrainConfig, collate, encode_conversation, evaluate_loss, length_batches, lr_at, pretrain,
)
from harness.rollout import rollout

sys.path.insert(0, str(Path(__file__).parents[1]))
from rollout_fixtures import ScriptedEngine  # noqa: E402


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return MicroEnv(seed=0, n_train=24, n_eval=12, cache_dir=tmp_path_factory.mktemp("cache"), prompt="compact")


def replay(tok, messages) -> ScriptedEngine:
    """An engine that answers turn t with the canonical ids of a transcript's t-th assistant message and
    its end token."""
    eot = tok.convert_tokens_to_ids(tok.eos_token)
    turns = [list(tok.encode(m["content"], add_special_tokens=False)) + [eot]
             for m in messages if m["role"] == "assistant"]
    return ScriptedEngine(turns, eos=[eot], logprob=0.0)


@pytest.mark.parametrize("task_id, mistake", [("micro_shop-train-task_0", None),
                                              ("micro_files-train-task_4", None),
                                              ("micro_bank-train-task_1", "wrong_reason")])
def test_encoding_is_exactly_what_a_rollout_produces(tok, env, task_id, mistake):
    traj = run_solver(env, task_id, mistake)
    ex = encode_conversation(tok, traj.messages)
    played = rollout([env], replay(tok, traj.messages), tok, options=[{"task_id": task_id}])[0]
    assert played.episode.reward == traj.reward
    assert ex.ids == played.token_ids
    assert ex.mask == played.loss_mask


def test_mask_covers_only_assistant_tokens(tok, env):
    traj = run_solver(env, "micro_travel-train-task_5")
    ex = encode_conversation(tok, traj.messages)
    eot = tok.eos_token
    supervised = tok.decode([i for i, m in zip(ex.ids, ex.mask) if m], skip_special_tokens=False)
    assistant = "".join(m["content"] + eot for m in traj.messages if m["role"] == "assistant")
    assert supervised == assistant
    rest = tok.decode([i for i, m in zip(ex.ids, ex.mask) if not m], skip_special_tokens=False)
    assert "<tool_response>" in rest and traj.messages[1]["content"] in rest
    assert not any(m["content"] in rest for m in traj.messages if m["role"] == "assistant" and "<tool_call>" in m["content"])


def test_encoding_rejects_transcripts_without_the_right_shape(tok):
    with pytest.raises(ValueError):
        encode_conversation(tok, [{"role": "user", "content": "hi"}])
    with pytest.raises(ValueError):
        encode_conversation(tok, [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                                  {"role": "user", "content": "again"}])
    with pytest.raises(ValueError):
        Example([1, 2], [1, 0])


def test_length_batches_cover_every_index_once_within_the_budget():
    rng = random.Random(1)
    lengths = [rng.randint(1, 50) for _ in range(200)]
    batches = length_batches(lengths, batch_tokens=120, max_batch_size=6, rng=random.Random(0))
    assert sorted(i for b in batches for i in b) == list(range(200))
    for b in batches:
        assert len(b) <= 6 and (len(b) == 1 or max(lengths[i] for i in b) * len(b) <= 120)
    assert batches == length_batches(lengths, 120, 6, random.Random(0))  # deterministic


def test_collate_pads_right_and_masks():
    ids, attn, loss = collate([Example([5, 6, 7], [0, 1, 1]), Example([8], [0])], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert attn.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert loss.tolist() == [[False, True, True], [False, False, False]]


def test_schedule_warms_up_then_decays():
    cfg = PretrainConfig(lr=1.0, warmup_steps=4, min_lr_ratio=0.1)
    lrs = [lr_at(s, 20, cfg) for s in range(20)]
    assert lrs[0] == 0.25 and lrs[3] == 1.0
    assert all(a >= b for a, b in zip(lrs[3:], lrs[4:])) and lrs[-1] >= 0.1 - 1e-9


def test_pretraining_reduces_the_loss_and_is_deterministic(tok, env):
    examples = [encode_conversation(tok, run_solver(env, f"micro_shop-train-task_{i}").messages)
                for i in (0, 6, 12, 18)]
    preset = TinyPreset(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                        intermediate_size=64, head_dim=16)

    def fit():
        torch.manual_seed(0)
        model = Qwen3ForCausalLM(tiny_config(preset, tok))
        before = evaluate_loss(model, examples, tok.pad_token_id)
        res = pretrain(model, examples, PretrainConfig(epochs=12, batch_tokens=4096, lr=1e-2, warmup_steps=2,
                                                        progress=False), pad_id=tok.pad_token_id)
        return model, before, evaluate_loss(model, examples, tok.pad_token_id), res

    model, before, after, res = fit()
    assert after < before * 0.7, (before, after)
    assert res.steps == 12 and len(res.losses) == 12 and res.supervised_tokens > 0
    assert res.tokens == 12 * sum(len(e) for e in examples)
    assert not model.training
    _, _, after2, res2 = fit()
    assert res2.losses == res.losses and after2 == after


def test_pretraining_drops_overlong_examples_and_refuses_nothing_to_learn(tok):
    model = Qwen3ForCausalLM(tiny_config(TinyPreset(32, 1, 2, 1, 64, 16), tok))
    short, long = Example([1, 2, 3], [0, 1, 1]), Example(list(range(1, 40)), [0] + [1] * 38)
    res = pretrain(model, [short, long], PretrainConfig(epochs=1, max_len=10, progress=False))
    assert res.dropped == 1 and res.steps == 1
    with pytest.raises(ValueError):
        pretrain(model, [long], PretrainConfig(epochs=1, max_len=10, progress=False))
    with pytest.raises(ValueError):
        pretrain(model, [short], PretrainConfig(epochs=0, progress=False))
