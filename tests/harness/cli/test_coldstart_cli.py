"""``lopd coldstart``: (retrieved experiences -> successful trajectory) pairs warm the composer, and
``lopd train`` starts LOPD from the result (which is also the anchor)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "learners"))
from learner_fixtures import make_trainer, small_overrides, write_shop_expert_traces  # noqa: E402

from harness.cli import main  # noqa: E402
from harness.metrics import read_metrics  # noqa: E402


@pytest.mark.slow
def test_coldstart_lowers_the_nll_and_its_composer_loads_as_init_and_anchor(tmp_path):
    torch.set_num_threads(1)
    traces = write_shop_expert_traces(tmp_path / "expert.jsonl")
    run = tmp_path / "cs"
    args = small_overrides(run, "lopd", traces, "lopd.coldstart.steps=6", "lopd.coldstart.batch_size=2",
                           "lopd.coldstart.lr=1e-2", "lopd.composer.qformer.n_latents=4")
    assert main(["coldstart", *args, "--traces", str(traces)]) == 0
    losses = [r["coldstart/loss"] for r in read_metrics(run / "coldstart_metrics.jsonl")]
    assert len(losses) == 6 and losses[-1] < losses[0]
    saved = torch.load(run / "composer_coldstart.pt")
    for name in saved["trainable"]:  # the anchor IS the warmed composer
        torch.testing.assert_close(saved["anchor"][name], saved["trainable"][name])
    tr = make_trainer(tmp_path / "rl", "lopd", traces, "lopd.composer.qformer.n_latents=4",
                      f"lopd.composer_init={run / 'composer_coldstart.pt'}")
    for name, p in tr.learner.composer.named_trainable_parameters():
        torch.testing.assert_close(p.detach(), saved["trainable"][name].to(p.device))
    tr.close()


def test_coldstart_without_usable_pairs_is_a_clear_error(tmp_path, capsys):
    traces = write_shop_expert_traces(tmp_path / "expert.jsonl")
    # the bank is empty (no bank.traces), so no pair has retrieved experiences
    args = [f"run_dir={tmp_path / 'cs'}", "env.id=lopd/shop-v0", "bank.embedder=hashing", "log.progress=false",
            "lopd.composer.qformer.depth=1"]
    assert main(["coldstart", *args, "--traces", str(traces)]) == 2
    assert "no cold-start pair" in capsys.readouterr().err


def test_coldstart_batch_order_follows_the_composer_seed_not_the_run_seed(tmp_path, monkeypatch):
    """One cached cold start serves every seed of a comparison, so its data order must not read ``seed``."""
    import lopd.coldstart
    from harness.training.coldstart import train_composer
    from harness.config import load_config
    from harness.training.train_config import TrainConfig

    def order(*overrides: str) -> list[int]:
        seen: list[int] = []
        monkeypatch.setattr(lopd.coldstart, "make_coldstart_optimizer", lambda composer, cs: None)
        monkeypatch.setattr(lopd.coldstart, "coldstart_step",
                            lambda c, batch, opt, cs: seen.extend(batch) or {})
        composer = type("Composer", (), {"set_anchor": lambda self: None})()
        cfg = load_config(TrainConfig, None, ["log.progress=false", "lopd.coldstart.steps=5",
                                              "lopd.coldstart.batch_size=4", *overrides])
        train_composer(composer, list(range(10)), cfg, tmp_path / "m.jsonl")
        return seen

    assert order("seed=1") == order("seed=2")
    assert order("lopd.composer_seed=0") != order("lopd.composer_seed=1")
    assert sorted(order()[:10]) == list(range(10))  # epoch by epoch: every pair once before any repeats
