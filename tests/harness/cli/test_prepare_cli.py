"""``lopd prepare``: the bank and the cold-start composer of an LOPD config, built by the demo's cached
stages from the pinned base and written where the config points; ``lopd train`` then starts from them."""

from __future__ import annotations

import shlex

import pytest
import torch

from harness.models import pinned as pinned_base
from harness.cli import main
from harness.metrics import read_metrics
from harness.training.trainer import example_config

# small: 16 bank tasks, 16 referenced cold-start tasks, 2 composer steps of 2
SMALL = ["bank.embedder=hashing", "log.progress=false", "lopd.coldstart.batch_size=2",
         "lopd.composer.qformer.n_latents=4", "lopd.composer.qformer.depth=2"]
OPTIONS = ["--bank-tasks", "16", "--coldstart-tasks", "16", "--coldstart-steps", "2"]


@pytest.mark.slow
def test_prepare_writes_bank_and_composer_then_lopd_train_starts_from_them(tmp_path, monkeypatch, capsys):
    from lopd.bank import ExperienceBank

    if pinned_base.pinned_info() is None:
        pytest.skip(f"no pinned base is shipped ({pinned_base.PINNED_DIR})")
    torch.set_num_threads(1)
    monkeypatch.setenv("LOPD_CACHE_DIR", str(tmp_path / "cache"))  # not the user's cache
    monkeypatch.chdir(tmp_path)  # the packaged config's runs/ paths land here
    config = str(example_config("lopd"))
    overrides = [f"run_dir={tmp_path / 'run'}", *SMALL]
    assert main(["prepare", config, *overrides, *OPTIONS]) == 0
    out = capsys.readouterr().out
    bank = ExperienceBank.load(tmp_path / "runs" / "bank")
    assert len(bank) >= 2 and f"bank: {len(bank)} experiences" in out
    composer = tmp_path / "runs" / "lopd" / "composer_coldstart.pt"
    saved = torch.load(composer)
    assert set(saved) == {"trainable", "anchor"}
    assert "episodes generated: 16 bank + " in out and "cold start = " in out  # the budget they cost
    assert ".build-" not in out  # the cache's temporary folder is never offered as the composer
    nxt = out.strip().splitlines()[-1]
    assert nxt == "next: " + shlex.join(["lopd", "train", config, *overrides])  # the config names both files

    # again: every stage from the cache, the files already in place
    assert main(["prepare", config, *overrides, *OPTIONS]) == 0
    out = capsys.readouterr().out
    assert out.count("(up to date)") == 2 and "cached" in out
    # another cold start is not written over the run's composer unless asked
    written = composer.read_bytes()
    assert main(["prepare", config, *overrides, *OPTIONS[:-1], "3"]) == 2
    assert "--force" in capsys.readouterr().err and composer.read_bytes() == written

    # one LOPD step from what prepare wrote
    assert main(["train", config, *overrides, "generations=4", "rollouts_per_step=4", "eval.at_start=false",
                 "eval.at_end=false", "eval.every_generations=0", "checkpoint.every_steps=0"]) == 0
    step = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "train/loss" in r]
    assert len(step) == 1 and step[0]["train/bank_size"] == len(bank) and step[0]["train/no_latent_frac"] < 1.0


def test_prepare_refuses_what_it_cannot_build(capsys):
    assert main(["prepare", str(example_config("grpo"))]) == 2
    assert "reads no bank" in capsys.readouterr().err
    assert main(["prepare", str(example_config("lopd")), "model.path=tiny:1m"]) == 2
    assert "not a built micro base" in capsys.readouterr().err
    assert main(["prepare", str(example_config("lopd")), "env.kwargs.n_train=60"]) == 2
    assert 'set env.kwargs={"seed": 0, "n_train": 600' in capsys.readouterr().err
