"""The shared learner code: micro-batching, context framing, scoring, the global-token normalisation."""

from __future__ import annotations

import pytest
import torch
from learner_fixtures import make_trainer

from harness.learners.base import get_learner
from harness.learners.common import (Timer, TokenScorer, distill_tokens, distill_update, micro_batches, pad_rows,
                                     prompt_messages, teacher_prompt, teacher_side, with_context)
from lopd.config import DistillConfig
from lopd.losses import distill_per_token, token_log_probs


def test_micro_batches_respect_the_token_budget_and_keep_order():
    assert micro_batches([4, 4, 4, 9], 12) == [[0, 1, 2], [3]]
    assert micro_batches([20, 1], 8) == [[0], [1]]  # a longer row still gets its own group
    lengths = [5, 17, 9, 12, 3]
    for budget in (1, 17, 30, 1000):
        mbs = micro_batches(lengths, budget)
        assert sum(mbs, []) == list(range(5))
        assert all(len(mb) == 1 or len(mb) * max(lengths[i] for i in mb) <= budget for mb in mbs)


def test_with_context_system_and_user_slots():
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "T"}]
    assert with_context(msgs, "X", "system", "\nref: {context}")[0]["content"] == "S\nref: X"
    assert with_context(msgs, "X", "user", "{context}|{task}")[1]["content"] == "X|T"
    assert msgs[0]["content"] == "S" and msgs[1]["content"] == "T"  # copies, the input is untouched
    with pytest.raises(ValueError):
        with_context(msgs, "X", "assistant", "{context}")


def test_unknown_learner_is_a_clear_error():
    with pytest.raises(KeyError, match="unknown learner"):
        get_learner("nope")


def test_scorer_matches_the_model_and_distillation_is_micro_batch_invariant(tmp_path):
    tr = make_trainer(tmp_path, "sdpo")
    batch, _ = tr.collect(1)
    rs = batch.rollouts
    ids, attn = pad_rows([r.traj.token_ids for r in rs], 0)
    pos = torch.tensor([[3, 7, 11]] * len(rs))
    with torch.no_grad():
        full = tr.student(input_ids=ids, attention_mask=attn).logits
        torch.testing.assert_close(tr.scorer(ids, attn, positions=pos), full[:, [3, 7, 11]].float(), atol=1e-4, rtol=1e-4)
    # teacher = the initial model shown a context: grads from one big micro-batch == from one row at a time
    prompts = [teacher_prompt(tr.tokenizer, r.traj.episode, "some context", "user", "{context}\n{task}", {}) for r in rs]
    assert "some context" in tr.tokenizer.decode(prompts[0])
    assert "some context" not in prompt_messages(rs[0].traj.episode)[1]["content"]
    teacher = TokenScorer(tr.ctx.frozen_copy())
    grads = []
    for budget in (100_000, 1):
        tr.cfg.micro_batch_tokens = budget
        tr.ctx.optimizer_step = lambda: {"grad_norm": 0.0}  # keep weights and gradients: compare gradients
        m = distill_update(tr.ctx, rs, prompts, teacher, DistillConfig(), Timer())
        grads.append(([p.grad.clone() for p in tr.scorer.parameters()], m["loss"]))
    assert grads[0][1] == pytest.approx(grads[1][1], rel=1e-4)
    for a, b in zip(grads[0][0], grads[1][0]):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)
    tr.close()


def _tiny_lm(seed: int) -> torch.nn.Module:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen3Config(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=8, tie_word_embeddings=True)
    return Qwen3ForCausalLM(cfg).double().eval()


@pytest.mark.parametrize("full_vocab", [False, True])
@pytest.mark.parametrize("chunk", [0, 4, 7])
def test_chunked_scoring_equals_whole_logits_values_and_gradients(chunk, full_vocab):
    """The scorer's chunked head (log-probs, the teacher's top-k or hidden states, the student's KL)
    gives what the whole [B, N, V] logits give, float64 (see tests/lopd/test_chunked.py for RTOL)."""
    student, teacher = TokenScorer(_tiny_lm(0), chunk), TokenScorer(_tiny_lm(1), chunk).requires_grad_(False)
    ids = torch.randint(0, 40, (2, 9), generator=torch.Generator().manual_seed(0))
    attn, pos = torch.ones_like(ids), torch.tensor([[1, 2, 3, 5, 8], [0, 4, 5, 6, 7]])  # 10 positions
    targets, dcfg = ids.gather(1, pos), DistillConfig(top_k=3, full_vocab=full_vocab)
    params = [p for p in student.parameters() if p.requires_grad]

    def check(got, want):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        for a, b in zip(torch.autograd.grad(got.sum(), params), torch.autograd.grad(want.sum(), params)):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)

    check(student(ids, attn, positions=pos, per_chunk=token_log_probs, args=(targets,)),
          token_log_probs(student(ids, attn, positions=pos), targets))
    with torch.no_grad():
        side = teacher_side(teacher, ids, attn, pos, dcfg)
        t_logits = teacher(ids, attn, positions=pos)
    per_tok, logp = distill_tokens(student, ids, attn, pos, dcfg, side, extra_ids=targets.unsqueeze(-1))
    assert logp.shape == (2, 5, side.ids.shape[-1] + 1)
    check(per_tok, distill_per_token(student(ids, attn, positions=pos), dcfg, teacher_logits=t_logits))


def test_module_doctests():
    import doctest

    import harness.learners.common as common
    import harness.learners.privileged as privileged
    import harness.metrics as metrics
    import harness.training.sampler as sampler

    for mod in (common, privileged, metrics, sampler):
        result = doctest.testmod(mod)
        assert result.failed == 0 and result.attempted > 0, mod.__name__
