"""The options that give the authors' recipe (issue #31), each doing what it says inside an LOPD step, and
harness/configs/lopd_authors.yaml being what benchmarks/protocols/ablation.yaml's ``authors`` recipe runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from learner_fixtures import make_trainer

from harness.learners.lopd_reference import reference_step_of

ROOT = Path(__file__).resolve().parents[3]


def _reward(batch, rewards):
    for r, x in zip(batch.rollouts, rewards):
        r.traj.episode.reward = x


def test_the_authors_recipe_trains_a_step_and_matches_the_reference(tmp_path, shop_traces):
    """Every authors' option at once (bf16 QFormer without a master copy, self-retrieval, drop, their
    framing, token-weighted dual mean over every assistant token) through the learner and the reference."""
    tr = make_trainer(tmp_path, "lopd", shop_traces, "lopd.composer.qformer.n_latents=2", "lopd.framing=authors",
                      "lopd.allow_self_retrieval=true", "lopd.unretrieved=drop", "lopd.margin.dual_mean=token_weighted",
                      "lopd.margin.token_scope=assistant", "lopd.composer.qformer.dtype=bfloat16",
                      "lopd.composer.qformer.master_weights=false")
    lrn = tr.learner
    assert {p.dtype for n, p in lrn.composer.named_trainable_parameters() if n.startswith("qformer.")} == {torch.bfloat16}
    batch, _ = tr.collect(1)
    _reward(batch, [1.0, 0.0, 1.0, 0.0])
    ref = reference_step_of(lrn, batch)
    m = lrn.train_step(batch)
    assert m["no_latent_frac"] == 0.0  # self-retrieval on: the shop's one training task finds its own entry
    assert m["composer/beta_next"] == pytest.approx(ref.beta_next, abs=1e-6)
    assert m["composer/delta"] == pytest.approx(ref.mean_delta, abs=1e-6)
    tr.close()


def test_master_weights_keep_float32_parameters_and_run_in_bfloat16():
    from lopd.composer import QFormer
    from lopd.config import QFormerConfig

    torch.manual_seed(0)
    master = QFormer.from_config(16, 4, QFormerConfig(n_latents=2, depth=2, dtype="bfloat16"))
    plain = QFormer.from_config(16, 4, QFormerConfig(n_latents=2, depth=2, dtype="bfloat16", master_weights=False))
    assert master.queries.dtype == torch.float32 and plain.queries.dtype == torch.bfloat16
    plain.load_state_dict({k: v.to(torch.bfloat16) for k, v in master.state_dict().items()})
    h = torch.randn(1, 5, 16)
    out = master(h)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, plain(h))  # the same bf16 arithmetic over the same (rounded) weights
    out.float().sum().backward()
    assert master.queries.grad is not None and master.queries.grad.dtype == torch.float32


def test_a_step_below_half_a_bf16_ulp_is_lost_without_a_master_copy():
    """The authors' claim in miniature: AdamW's first step is ~lr in size; on a bf16 weight of 1.0 (ulp
    2^-7) a 1e-3 step rounds away, on its float32 master copy it lands."""
    outs = {}
    for dtype in (torch.bfloat16, torch.float32):
        w = torch.nn.Parameter(torch.ones(4, dtype=dtype))
        opt = torch.optim.AdamW([w], lr=1e-3, weight_decay=0.0)
        w.grad = torch.ones_like(w)
        opt.step()
        outs[dtype] = w.detach().float()
    assert torch.equal(outs[torch.bfloat16], torch.ones(4))
    assert torch.allclose(outs[torch.float32], torch.full((4,), 1 - 1e-3), atol=1e-6)


def test_tool_call_scope_counts_only_the_call_tokens(tmp_path, shop_traces):
    """With token_scope=tool_call kl_i and Delta_i read only the tool-call tokens: a rollout with none gets
    Delta 0, and the learner agrees with the reference (which decodes every token plainly)."""
    from harness.learners.lopd_composer import scope_tokens

    tr = make_trainer(tmp_path, "lopd", shop_traces, "lopd.composer.qformer.n_latents=2",
                      "lopd.margin.token_scope=tool_call", "lopd.margin.dual_mean=token_weighted")
    lrn = tr.learner
    batch, _ = tr.collect(1)
    ep = batch.rollouts[0]
    # splice a real tool call into the first rollout's supervised tokens, so that the scope is not empty
    call = tr.tokenizer.encode('<tool_call>{"name": "x"}</tool_call>', add_special_tokens=False)
    ep.traj.token_ids = ep.traj.token_ids[:ep.prompt_len] + call + ep.traj.token_ids[ep.prompt_len:]
    ep.traj.loss_mask = ep.traj.loss_mask[:ep.prompt_len] + [1] * len(call) + ep.traj.loss_mask[ep.prompt_len:]
    ep.traj.logprobs = ep.traj.logprobs[:ep.prompt_len] + [0.0] * len(call) + ep.traj.logprobs[ep.prompt_len:]
    scope = scope_tokens(tr.tokenizer, [ep.traj.token_ids], [ep.traj.loss_mask], "tool_call", {})[0]
    assert sum(scope) == len(call)
    _reward(batch, [1.0, 0.0, 1.0, 0.0])
    ref = reference_step_of(lrn, batch)
    m = lrn.train_step(batch)
    assert m["composer/delta"] == pytest.approx(ref.mean_delta, abs=1e-6)
    assert m["composer/beta_next"] == pytest.approx(ref.beta_next, abs=1e-6)
    tr.close()


def test_drop_leaves_rollouts_without_retrieval_unsupervised(tmp_path):
    """An empty bank retrieves nothing: plain_teacher still distils every rollout from the plain teacher,
    drop supervises none of them, moves nothing and leaves beta where it was."""
    runs = {}
    for mode in ("plain_teacher", "drop"):
        tr = make_trainer(tmp_path / mode, "lopd", None, "lopd.composer.qformer.n_latents=2",
                          f"lopd.unretrieved={mode}", "optim.weight_decay=0.0")  # no decay: zero grads move nothing
        student0 = {k: v.detach().clone() for k, v in tr.student.named_parameters()}
        batch, _ = tr.collect(1)
        runs[mode] = m = tr.learner.train_step(batch)
        moved = any(not torch.equal(student0[k], p) for k, p in tr.student.named_parameters())
        assert m["no_latent_frac"] == 1.0
        assert moved == (mode == "plain_teacher")
        tr.close()
    assert runs["plain_teacher"]["tokens"] > 0 and runs["drop"]["tokens"] == 0
    assert runs["drop"]["composer/beta_next"] == runs["drop"]["composer/beta"]


def test_the_authors_framing_is_a_name_and_a_bad_one_is_an_error():
    from lopd.latent import AUTHORS_FRAMING, LatentError, framing_text

    assert "REFERENCE EXAMPLE" in framing_text("authors") and framing_text("authors") == AUTHORS_FRAMING
    with pytest.raises(LatentError, match="neither a name"):
        framing_text("autors")


def test_separate_optimizers_step_each_group_on_its_own_finite_norm():
    """Two optimisers with separate clips: a non-finite QFormer gradient skips the QFormer's step only;
    one optimiser skips the whole step."""
    from types import SimpleNamespace

    from lopd.coldstart import _step_finite

    for separate, lora_moves in ((True, True), (False, False)):
        lora, qf = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2))
        comp = SimpleNamespace(parameter_groups=lambda: {"lora": [lora], "qformer": [qf]})
        if separate:
            opt = {n: torch.optim.AdamW(p, lr=0.1) for n, p in comp.parameter_groups().items()}
        else:
            opt = torch.optim.AdamW([lora, qf], lr=0.1)
        lora.grad, qf.grad = torch.ones(2), torch.ones(2)
        stepped = _step_finite(opt, {"lora_grad_norm": 1.0, "qformer_grad_norm": float("inf")})
        assert not stepped
        assert (not torch.equal(lora.detach(), torch.ones(2))) == lora_moves
        assert torch.equal(qf.detach(), torch.ones(2))


def test_the_protocols_authors_recipe_is_lopd_authors_yaml():
    """benchmarks/protocols/ablation.yaml's ``authors`` overrides on lopd.yaml give lopd_authors.yaml's config
    (but for the folders and the budget, which the pipeline sets, and the drift probe, a diagnostic)."""
    from harness.config import load_config, to_dict
    from harness.training.train_config import TrainConfig
    from benchmarks.ablation import load

    proto = load(ROOT / "benchmarks" / "protocols" / "ablation.yaml", [])
    got = to_dict(load_config(TrainConfig, ROOT / "harness" / "configs" / "lopd.yaml", proto.recipes["authors"]))
    want = to_dict(load_config(TrainConfig, ROOT / "harness" / "configs" / "lopd_authors.yaml"))
    for d in (got, want):
        d.pop("run_dir"), d.pop("generations"), d.pop("eval"), d["bank"].pop("path"), d["lopd"].pop("composer_init")
        d["lopd"].pop("drift_probe")
    assert got == want


def test_drift_and_movement_are_zero_at_the_anchor_and_grow_when_the_composer_trains(tmp_path, shop_traces):
    from harness.learners.lopd_drift import DriftProbe, teacher_drift

    got = {}
    for train in (True, False):
        tr = make_trainer(tmp_path / str(train), "lopd", shop_traces, "lopd.composer.qformer.n_latents=2",
                          "lopd.drift_probe=2", "lopd.allow_self_retrieval=true", f"lopd.train_composer={train}")
        lrn = tr.learner
        batch, _ = tr.collect(1)
        _reward(batch, [1.0, 0.0, 1.0, 0.0])
        got[train] = lrn.train_step(batch)
        if not train:
            assert lrn.drift_probe is None  # a frozen composer's drift is 0 without a probe
            tr.close()
            continue
        assert len(lrn.drift_probe.rows) == 1  # the shop has one training task
        state = lrn.state_dict()
        assert DriftProbe(**state["drift_probe"]).rows == lrn.drift_probe.rows
        lrn.composer.load_trainable_state_dict({"trainable": state["composer"]["anchor"],
                                                "anchor": state["composer"]["anchor"]})
        assert teacher_drift(lrn.composer, lrn.drift_probe, tr.tokenizer, tr.ctx.device) == pytest.approx(0, abs=1e-12)
        assert lrn.composer.moved_from_anchor() == {"lora": 0.0, "qformer": 0.0}
        tr.close()
    assert got[True]["composer/drift_kl"] > 0 and got[True]["composer/qformer_moved"] > 0
    assert got[False]["composer/drift_kl"] == pytest.approx(0, abs=1e-12)
