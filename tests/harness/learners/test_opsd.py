"""OPSD's wiring: the task's oracle trajectory in the frozen teacher's system message, forward KL."""

from __future__ import annotations

import pytest
import torch
from learner_fixtures import make_trainer

import harness.learners.opsd as opsd


def test_oracle_from_bank_goes_into_the_system_message(tmp_path, shop_traces, distill_prompts):
    tr = make_trainer(tmp_path, "opsd", shop_traces, "opsd.oracle=bank")
    batch, _ = tr.collect(1)
    oracle = tr.learner.oracle(batch.rollouts[0].task)
    assert oracle is not None and "add_to_cart" in oracle and "apple" in oracle
    seen = distill_prompts(opsd)
    before = {k: v.clone() for k, v in tr.student.state_dict().items()}
    m = tr.learner.train_step(batch)
    text = tr.tokenizer.decode(seen["prompts"][0])
    system = text.split("<|im_start|>user")[0]
    assert "Reference solution" in system and "add_to_cart" in system  # the system message, before the task
    assert m["no_oracle_frac"] == 0.0 and m["distill_kl"] > 0.0 and m["skipped_update"] == 0.0
    assert tr.cfg.opsd.distill.direction == "forward" and tr.cfg.opsd.distill.full_vocab
    assert any(not torch.equal(before[k], v) for k, v in tr.student.state_dict().items())
    tr.close()


def test_tasks_without_oracle_get_no_signal(tmp_path):
    tr = make_trainer(tmp_path, "opsd", None, "opsd.oracle=bank_then_reference")  # empty bank, shop has no reference
    batch, _ = tr.collect(1)
    m = tr.learner.train_step(batch)
    assert m["no_oracle_frac"] == pytest.approx(1.0) and m["skipped_update"] == 1.0
    tr.close()
