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


def test_the_cold_start_keeps_trajectories_by_its_own_min_reward(tmp_path):
    """lopd.coldstart.min_reward, not the bank's: a bank that keeps failures (the authors') still warms the
    composer on successes only, unless the cold start is told otherwise."""
    from envs.trace import read_traces, write_traces
    from harness.config import load_config
    from harness.learners.privileged import load_bank
    from harness.training.coldstart import build_examples
    from harness.training.train_config import TrainConfig

    traces = write_shop_expert_traces(tmp_path / "expert.jsonl")
    eps = list(read_traces(traces))
    for ep in eps[::2]:
        ep.reward = 0.0
    write_traces(tmp_path / "mixed.jsonl", eps)
    n_ok = sum(ep.reward >= 1 and ep.split == "train" for ep in eps)
    n_train = sum(ep.split == "train" for ep in eps)
    counts = {}
    for min_reward in (1.0, 0.0):
        cfg = load_config(TrainConfig, None, small_overrides(tmp_path / "cs", "lopd", tmp_path / "mixed.jsonl",
                                                             "bank.config.min_reward=0.0",
                                                             "lopd.allow_self_retrieval=true",
                                                             f"lopd.coldstart.min_reward={min_reward}"))
        tr = make_trainer(tmp_path / f"t{min_reward}", "lopd", tmp_path / "mixed.jsonl", "lopd.composer.qformer.n_latents=2")
        examples, _ = build_examples(cfg, tr.tokenizer, load_bank(cfg.bank), [str(tmp_path / "mixed.jsonl")], 2)
        counts[min_reward] = len(examples)
        tr.close()
    assert 0 < n_ok < n_train and counts == {1.0: n_ok, 0.0: n_train}
