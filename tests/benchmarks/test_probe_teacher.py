"""benchmarks/probe_teacher.py on a small base: every condition is played and scored."""

import json
import math

import pytest
import torch

import benchmarks.probe_teacher as pt
from benchmarks.probe_teacher import CONDITIONS, probe, teacher_advantage
from harness.basemodel.build import load_or_build_base
from harness.basemodel.config import BaseModelConfig
from harness.experiments.demo import DemoConfig, run_pipeline, RunSpec
from harness.prepare.stages import Base, StageConfig, build_bank_dir
from harness.basemodel.pretrain import PretrainConfig


def _small_base() -> BaseModelConfig:
    pre = PretrainConfig(epochs=1, batch_tokens=4096, warmup_steps=1, progress=False)
    return BaseModelConfig(n_train=60, n_eval=12, n_plain=16, n_referenced=8, vocab_size=400,
                           n_copy_drills=16, mixed_drills=0, pretrain=pre)


@pytest.mark.slow
def test_probe_plays_every_condition(tmp_path, monkeypatch):
    from lopd.composer import Composer
    from lopd.config import ComposerConfig, QFormerConfig

    monkeypatch.setenv("LOPD_CACHE_DIR", str(tmp_path / "cache"))
    cfg = _small_base()
    model, tok, info = load_or_build_base(cfg, progress=False)
    demo = StageConfig(bank_tasks=8, min_bank=8, embedder="hashing", max_new_tokens=24, progress=False)
    bank, _ = build_bank_dir(Base(model, tok, cfg, info), demo, tmp_path / "demo")
    composer = Composer(model, tok, ComposerConfig(qformer=QFormerConfig(n_latents=4, depth=2)))
    torch.save(composer.trainable_state_dict(), tmp_path / "composer.pt")

    res = probe(info["path"], str(bank), [str(tmp_path / "composer.pt")], n_tasks=3, samples=1, retrieve=2,
                composer_overrides=["lopd.composer.qformer.n_latents=4", "lopd.composer.qformer.depth=2"],
                embedder="hashing")
    assert list(res["conditions"]) == ["none", "oracle", "retrieved", f"latent:{tmp_path / 'composer.pt'}"]
    for c in res["conditions"].values():
        assert math.isfinite(c["reward"]) and 0.0 <= c["full_pass"] <= c["reward"] <= 1.0
    assert 0.0 <= res["top1_same_template"] <= 1.0 and res["tasks"] == 3


@pytest.mark.slow
def test_teacher_advantage_of_a_finished_lopd_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LOPD_CACHE_DIR", str(tmp_path / "cache"))
    demo = DemoConfig(out=str(tmp_path / "demo"), base=_small_base(), generations=8, rollouts_per_step=8,
                      eval_every=8, eval_tasks=4, val_tasks=3, max_new_tokens=24, max_turns=3, bank_tasks=8,
                      min_bank=8, embedder="hashing", coldstart_steps=1, coldstart_batch=2, coldstart_tasks=8,
                      progress=False, jobs=1)
    rep = run_pipeline(demo, [RunSpec("lopd", "lopd")])
    run_dir = rep["runs"][0]["run_dir"]

    res = teacher_advantage(run_dir, n_tasks=3, samples=1, split="val")
    assert res["tasks"] == 3 and res["samples"] == 1 and res["split"] == "val"
    assert list(res["reward"]) == list(CONDITIONS)
    assert all(math.isfinite(r) and 0.0 <= r <= 1.0 for r in res["reward"].values())
    r = res["reward"]
    assert res["advantage_start"] == pytest.approx(r["teacher_start"] - r["student_start"], abs=1e-4)
    assert res["advantage_end"] == pytest.approx(r["teacher_end"] - r["student_end"], abs=1e-4)
    cached = json.loads((tmp_path / "demo" / "runs" / "lopd-s0" / pt.CACHE_FILE).read_text())
    assert list(cached.values()) == [res]

    def no_play(*a, **k):
        raise AssertionError("a cached result was played again")

    monkeypatch.setattr(pt, "play_rewards", no_play)
    assert teacher_advantage(run_dir, n_tasks=3, samples=1, split="val") == res
    pt.main(["--runs", str(run_dir), "--tasks", "3", "--samples", "1", "--split", "val"])
    assert f"{run_dir}: 3 val tasks x 1" in capsys.readouterr().out
    with pytest.raises(ValueError, match="no 'train2' tasks"):  # another key: played, but the split is empty
        teacher_advantage(run_dir, n_tasks=3, samples=1, split="train2")
