"""SFT's wiring: demonstrations tokenised like rollouts, assistant tokens only, the NLL goes down."""

from __future__ import annotations

import pytest
from learner_fixtures import make_trainer

from envs.trace import read_traces
from harness.learners.base import StepBatch
from harness.learners.common import conversation_tokens


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
