"""``lopd prepare``: the bank and the cold-start composer of an LOPD config, built by the demo's cached
stages from the pinned base and written where the config points; ``lopd train`` then starts from them."""

from __future__ import annotations

import shlex
from pathlib import Path

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
    # its sources (what `lopd bank query` shows) name the cache's trace file where it lies, not the
    # temp folder it was built in
    sources = {e.source.file for e in bank.experiences}
    assert all(Path(s).is_file() and ".build-" not in s for s in sources), sources
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


def test_a_bank_built_in_a_temp_folder_names_the_sources_it_is_renamed_to(tmp_path):
    import sys

    from harness.atomic_dir import build_dir
    from harness.learners.privileged import HashingEmbedder
    from harness.prepare.stages import sources_at
    from lopd.bank import ExperienceBank

    sys.path.insert(0, str(Path(__file__).parents[1] / "learners"))
    from learner_fixtures import write_shop_expert_traces

    target = tmp_path / "bank-1"

    def build(tmp):
        write_shop_expert_traces(tmp / "traces.jsonl")
        bank = ExperienceBank.build([tmp / "traces.jsonl"], embedder=HashingEmbedder())
        sources_at(bank, tmp, target)
        bank.save(tmp / "bank")

    assert build_dir(target, build, "DONE")
    sources = {e.source.file for e in ExperienceBank.load(target / "bank").experiences}
    assert sources == {str((target / "traces.jsonl").resolve())} and Path(sources.pop()).is_file()


@pytest.mark.slow
def test_prepare_and_train_run_the_authors_recipe_as_they_run_lopd_yaml(tmp_path, monkeypatch, capsys):
    """harness/configs/lopd_authors.yaml: its bank (failures kept, chat-template experiences, the task-only
    index), its cold start on the bank's base successes, then one LOPD step with its bf16 QFormer."""
    from lopd.bank import ExperienceBank

    if pinned_base.pinned_info() is None:
        pytest.skip(f"no pinned base is shipped ({pinned_base.PINNED_DIR})")
    torch.set_num_threads(1)
    monkeypatch.setenv("LOPD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    config = str(example_config("lopd").parent / "lopd_authors.yaml")
    overrides = [f"run_dir={tmp_path / 'run'}", *SMALL]
    assert main(["prepare", config, *overrides, *OPTIONS, "--coldstart-source", "base"]) == 0
    out = capsys.readouterr().out
    assert "the bank's successful base episodes are the pairs" in out
    bank = ExperienceBank.load(tmp_path / "runs" / "bank-authors")
    assert len(bank) == 16  # min_reward 0: every base episode, failed or not
    assert bank.config.render == "chat_template" and bank.config.embed_text == "task"
    assert all("<|im_start|>" in e.text for e in bank.experiences)
    composer = tmp_path / "runs" / "lopd-authors" / "composer_coldstart.pt"
    assert {v.dtype for k, v in torch.load(composer)["trainable"].items() if k.startswith("qformer.")} \
        == {torch.bfloat16}
    assert main(["train", config, *overrides, "generations=4", "rollouts_per_step=4", "eval.at_start=false",
                 "eval.at_end=false"]) == 0
    rec = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "train/composer/delta" in r]
    assert len(rec) == 1 and rec[0]["train/no_latent_frac"] == 0.0
