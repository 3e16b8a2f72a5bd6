"""The packaged configs (harness/configs/*.yaml): every one loads and trains from the pinned micro base,
on the world it was trained for, with the settings the demo pipeline gives it."""

import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.config import load_config
from harness.training.train_config import TrainConfig
from harness.training.trainer import example_config

LEARNERS = ["grpo", "opsd", "sdpo", "lopd", "sft"]


RECIPES = ["lopd_authors"]  # another recipe of a learner (tests/harness/learners/test_lopd_authors_options.py)


def test_the_packaged_configs_are_exactly_these():
    assert sorted(p.stem for p in example_config("grpo").parent.glob("*.yaml")) == sorted(LEARNERS + RECIPES)


@pytest.mark.parametrize("learner", LEARNERS)
def test_every_packaged_config_trains_the_pinned_base_on_its_world(learner):
    from harness.models.pinned import PINNED_DIR

    cfg = load_config(TrainConfig, example_config(learner))
    assert cfg.learner == learner and cfg.model.path == "micro:pinned"
    base = json.loads((PINNED_DIR / "base_info.json").read_text())["config"]
    world = {"seed": base["world_seed"], "n_train": base["n_train"], "n_eval": base["n_eval"], "prompt": base["prompt"]}
    assert cfg.env.id == "lopd/micro-v0" and cfg.env.kwargs == world
    assert world == {"seed": 0, "n_train": 600, "n_eval": 120, "prompt": "compact"}
    assert (cfg.sampling.max_new_tokens, cfg.rollout.max_turns) == (96, 8)  # the demo's, the base's
    assert (cfg.generations, cfg.rollouts_per_step, cfg.optim.lr) == (640, 32, 3e-4)
    assert (cfg.eval.every_generations, cfg.eval.max_tasks, cfg.eval.temperature) == (64, 120, 0.0)
    assert cfg.learner_config is None or cfg.learner_config == getattr(cfg, learner)


def test_the_lopd_config_names_what_lopd_prepare_writes():
    cfg = load_config(TrainConfig, example_config("lopd"))
    assert cfg.bank.path == "runs/bank" and cfg.lopd.composer_init == "runs/lopd/composer_coldstart.pt"
    assert cfg.lopd.composer_optim.lr == 2e-4  # the paper's 1e-5 scaled from width 2,560 to 128


def test_lopd_train_without_its_composer_or_bank_names_lopd_prepare(tmp_path, monkeypatch, capsys):
    (tmp_path / "harness" / "configs").mkdir(parents=True)
    shutil.copy(example_config("lopd"), tmp_path / "harness" / "configs" / "lopd.yaml")
    monkeypatch.chdir(tmp_path)  # the config's relative runs/ paths, as a fresh checkout has them
    fix = "run `lopd prepare harness/configs/lopd.yaml`"
    assert main(["train", "harness/configs/lopd.yaml"]) == 2
    err = capsys.readouterr().err
    assert "no cold-start composer at runs/lopd/composer_coldstart.pt" in err and fix in err
    assert "lopd.composer_init=random" in err
    (tmp_path / "runs" / "lopd").mkdir(parents=True)
    (tmp_path / "runs" / "lopd" / "composer_coldstart.pt").write_bytes(b"")
    assert main(["train", "harness/configs/lopd.yaml"]) == 2
    err = capsys.readouterr().err
    assert "no experience bank at runs/bank" in err and fix in err
    assert main(["train", "harness/configs/lopd.yaml", "lopd.composer_init=null"]) == 2
    assert "lopd.composer_init is not set" in capsys.readouterr().err
    assert not (tmp_path / "runs" / "lopd" / "config.yaml").exists()  # failed before the run started
