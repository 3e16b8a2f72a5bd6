"""Run folders keep their record: a rerun into a run_dir resumes with the same settings, refuses other
ones (naming the keys) unless --allow-config-change, and every change is kept (config.N.yaml, a log line)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "learners"))
from learner_fixtures import small_overrides  # noqa: E402

from harness.cli import main  # noqa: E402
from harness.config import load_config, save_config  # noqa: E402
from harness.metrics import read_metrics  # noqa: E402
from harness.training.run_record import ConfigChangeError, check_rerun, is_free  # noqa: E402
from harness.training.train_config import TrainConfig  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _cfg(run: Path, *extra: str) -> TrainConfig:
    return load_config(TrainConfig, None, small_overrides(run, "grpo", None, *extra))


def test_same_settings_or_free_keys_pass_weight_keys_are_refused_by_name(tmp_path):
    run = tmp_path / "run"
    assert check_rerun(_cfg(run)) is None  # no record yet
    run.mkdir()
    save_config(_cfg(run), run / "config.yaml")
    assert check_rerun(_cfg(run)) is None
    assert check_rerun(_cfg(tmp_path / "moved")) is None  # a folder's name is no setting
    free = check_rerun(_cfg(run, "log.progress=true", "eval.every_generations=8", "generations=64",
                            "checkpoint.keep=5", "model.logits_chunk=64", "sdpo.ema_rate=0.5"))
    assert free is not None and not free.forced  # another learner's section does not count
    assert set(free.changed) == {"log.progress", "eval.every_generations", "generations", "checkpoint.keep",
                                 "model.logits_chunk"}
    with pytest.raises(ConfigChangeError) as e:
        check_rerun(_cfg(run, "optim.lr=1e-4", "seed=3", "grpo.clip_low=0.1", "log.progress=true"))
    msg = str(e.value)
    for said in ("optim.lr: 0.001 -> 0.0001", "seed: 0 -> 3", "grpo.clip_low: 0.2 -> 0.1", "--allow-config-change"):
        assert said in msg
    assert "log.progress" not in msg  # only the keys that need asking are named
    forced = check_rerun(_cfg(run, "optim.lr=1e-4"), allow_change=True)
    assert forced.forced and forced.changed == {"optim.lr": (0.001, 0.0001)}
    assert not any(is_free(k) for k in ("optim.lr", "env.kwargs.n_train", "model.path", "sampling.temperature"))


def test_a_built_base_under_another_cache_folder_is_the_same_model(tmp_path, built_base):
    """A pinned base copied into a folder named by newer code resumes its runs; another base is refused."""
    old, moved, other = built_base("1m-aaa", "k1"), built_base("1m-bbb", "k1"), built_base("1m-ccc", "k2")
    run = tmp_path / "run"
    run.mkdir()
    save_config(_cfg(run, f"model.path={old}"), run / "config.yaml")
    assert check_rerun(_cfg(run, f"model.path={moved}")) is None
    with pytest.raises(ConfigChangeError, match="model.path"):
        check_rerun(_cfg(run, f"model.path={other}"))


def test_rerun_into_a_run_dir_resumes_refuses_then_records_an_asked_for_change(tmp_path, capsys):
    run = tmp_path / "run"
    args = small_overrides(run, "grpo", None, "generations=4", "checkpoint.every_steps=1")
    assert main(["train", *args]) == 0
    record = (run / "config.yaml").read_text()
    metrics = (run / "metrics.jsonl").read_text()

    assert main(["train", *args]) == 0  # same settings: resumes (here: nothing left to do), writes nothing new
    assert (run / "metrics.jsonl").read_text() == metrics and (run / "config.yaml").read_text() == record
    assert not list(run.glob("config.*.yaml")) and not (run / "config_changes.jsonl").exists()

    capsys.readouterr()
    assert main(["train", *args, "optim.lr=1e-4"]) == 2
    err = capsys.readouterr().err
    assert "lopd train: error:" in err and "optim.lr: 0.001 -> 0.0001" in err and "Traceback" not in err
    assert (run / "config.yaml").read_text() == record  # the refused rerun changed nothing

    assert main(["train", *args, "optim.lr=1e-4", "generations=8", "--allow-config-change"]) == 0
    assert (run / "config.1.yaml").read_text() == record  # the old record is kept
    assert load_config(TrainConfig, run / "config.yaml").optim.lr == 1e-4
    (line,) = [json.loads(x) for x in (run / "config_changes.jsonl").read_text().splitlines()]
    assert line["forced"] and line["from_step"] == 1 and line["kept_as"] == "config.1.yaml"
    assert line["changed"] == {"optim.lr": [0.001, 0.0001], "generations": [4, 8]}
    assert "settings changed from step 1" in capsys.readouterr().err
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl") if "train/loss" in r] == [1, 2]
