"""SFT's wiring: demonstrations tokenised like rollouts, assistant tokens only, the NLL goes down."""

from __future__ import annotations

import math

import pytest
from learner_fixtures import make_trainer, small_overrides

from envs.trace import read_traces
from harness.cli import main
from harness.learners.base import StepBatch
from harness.learners.common import conversation_tokens
from harness.metrics import read_metrics
from harness.models import build_tiny_model, save_pretrained
from harness.rollout import episode_tokens


def test_conversation_tokens_supervise_exactly_the_assistant_turns(tmp_path, shop_traces):
    tr = make_trainer(tmp_path, "sft", shop_traces)
    ep = next(read_traces(shop_traces))
    ids, mask = conversation_tokens(tr.tokenizer, ep.messages)
    tok = tr.tokenizer
    # the supervised runs, decoded, are the assistant turns each closed by the end-of-turn token
    runs, cur = [], []
    for t, m in zip(ids, mask):
        if m:
            cur.append(t)
        elif cur:
            runs.append(cur)
            cur = []
    runs += [cur] if cur else []
    turns = [m["content"] for m in ep.messages if m["role"] == "assistant"]
    assert [tok.decode(r) for r in runs] == [t + "<|im_end|>" for t in turns]
    assert "<tool_response>" in tok.decode([t for t, m in zip(ids, mask) if not m])
    tr.close()


def test_sft_trains_on_training_split_examples_and_the_loss_falls(tmp_path, shop_traces):
    tr = make_trainer(tmp_path, "sft", shop_traces, "optim.lr=1e-2")
    lrn = tr.learner
    assert len(lrn.examples) == 2  # the two 'apples' demos; the eval task 'mix' never trains
    losses = [lrn.train_step(StepBatch(s, [], 2, items=["0", "1"]))["loss"] for s in range(1, 6)]
    assert losses[-1] < losses[0] * 0.8
    tr.close()


def test_sft_refuses_an_empty_dataset(tmp_path):
    with pytest.raises(ValueError, match="no training example"):
        make_trainer(tmp_path, "sft")


def test_sft_trains_on_the_token_ids_of_a_lopd_eval_trace(tmp_path):
    """``lopd eval`` traces carry the rollout's token ids: SFT trains on them verbatim (issue #18)."""
    model = save_pretrained(*build_tiny_model("1m", seed=0), tmp_path / "tiny")
    out = tmp_path / "eval"
    assert main(["eval", "--env", "shop-v0", "--model", str(model), "--out", str(out), "--n-samples", "1",
                 "--max-new-tokens", "8", "--max-turns", "2", "--quiet"]) == 0
    traces = out / "traces.jsonl"
    train_eps = [e for e in read_traces(traces) if e.split == "train"]
    assert len(train_eps) == 1 and train_eps[0].prompt_token_ids is not None
    tr = make_trainer(tmp_path / "run", "sft", traces)
    lrn = tr.learner
    assert lrn.examples == [episode_tokens(train_eps[0])[:2]]  # the stored ids, not a re-rendering
    out = lrn.train_step(StepBatch(1, [], 1, items=["0"]))
    assert math.isfinite(out["loss"]) and out["loss"] > 0 and out["tokens"] == sum(lrn.examples[0][1])
    tr.close()


def test_lopd_train_sft_on_the_traces_of_a_lopd_train_run(tmp_path):
    """``lopd train`` traces carry token ids too: a second ``lopd train`` with ``learner=sft`` learns from them."""
    first = tmp_path / "grpo"
    assert main(["train", *small_overrides(first, "grpo", None, "generations=4")]) == 0
    traces = first / "traces.jsonl"
    eps = list(read_traces(traces))
    assert len(eps) == 4 and all(e.prompt_token_ids is not None for e in eps)
    second = tmp_path / "sft"
    assert main(["train", *small_overrides(second, "sft", traces, "generations=4")]) == 0
    trains = [r for r in read_metrics(second / "metrics.jsonl") if "train/loss" in r]
    assert [r["generations"] for r in trains] == [4] and math.isfinite(trains[0]["train/loss"])
