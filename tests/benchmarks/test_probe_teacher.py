"""benchmarks/probe_teacher.py on a small base: every condition is played and scored."""

import math

import pytest
import torch

from benchmarks.probe_teacher import probe
from harness.base_model import BaseModelConfig, load_or_build_base
from harness.demo import DemoConfig, build_bank_dir
from harness.pretrain import PretrainConfig


@pytest.mark.slow
def test_probe_plays_every_condition(tmp_path, monkeypatch):
    from lopd.composer import Composer
    from lopd.config import ComposerConfig, QFormerConfig

    monkeypatch.setenv("LOPD_CACHE_DIR", str(tmp_path / "cache"))
    cfg = BaseModelConfig(n_train=60, n_eval=12, n_plain=16, n_referenced=8, vocab_size=400, n_copy_drills=16,
                          mixed_drills=0, pretrain=PretrainConfig(epochs=1, batch_tokens=4096, warmup_steps=1, progress=False))
    model, tok, info = load_or_build_base(cfg, progress=False)
    demo = DemoConfig(base=cfg, bank_tasks=8, min_bank=8, embedder="hashing", max_new_tokens=24, progress=False)
    bank, _ = build_bank_dir(model, tok, demo, info, tmp_path / "demo")
    composer = Composer(model, tok, ComposerConfig(qformer=QFormerConfig(n_latents=4, depth=2)))
    torch.save(composer.trainable_state_dict(), tmp_path / "composer.pt")

    res = probe(info["path"], str(bank), [str(tmp_path / "composer.pt")], n_tasks=3, samples=1, retrieve=2,
                composer_overrides=["lopd.composer.qformer.n_latents=4", "lopd.composer.qformer.depth=2"],
                embedder="hashing")
    assert list(res["conditions"]) == ["none", "oracle", "retrieved", f"latent:{tmp_path / 'composer.pt'}"]
    for c in res["conditions"].values():
        assert math.isfinite(c["reward"]) and 0.0 <= c["full_pass"] <= c["reward"] <= 1.0
    assert 0.0 <= res["top1_same_template"] <= 1.0 and res["tasks"] == 3
