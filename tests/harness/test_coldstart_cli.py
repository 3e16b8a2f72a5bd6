"""``lopd coldstart``: (retrieved experiences -> successful trajectory) pairs warm the composer, and
``lopd train`` starts LOPD from the result (which is also the anchor)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent / "learners"))
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
