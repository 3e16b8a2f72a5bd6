"""The trainer: budget and eval schedule, metrics and traces, checkpoints, ``lopd train``/``export``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "learners"))
from learner_fixtures import small_overrides, write_shop_expert_traces  # noqa: E402

from envs.trace import read_traces  # noqa: E402
from harness.cli import main  # noqa: E402
from harness.metrics import read_metrics  # noqa: E402


pytestmark = pytest.mark.usefixtures("one_thread")


def test_lopd_train_runs_evaluates_logs_traces_checkpoints_and_exports(tmp_path, capsys):
    run = tmp_path / "run"
    args = small_overrides(run, "grpo", None, "generations=8", "eval.every_generations=4", "eval.at_start=true",
                           "eval.samples=2", "checkpoint.every_steps=1", "checkpoint.keep=1", "log.tensorboard=true")
    assert main(["train", *args]) == 0
    recs = read_metrics(run / "metrics.jsonl")
    evals = [r for r in recs if "eval/reward" in r]
    trains = [r for r in recs if "train/reward" in r]
    assert [r["generations"] for r in evals] == [0, 4, 8] and [r["generations"] for r in trains] == [4, 8]
    assert all(r["eval/episodes"] == 2.0 for r in evals)  # the one eval task x 2 samples
    assert {"train/loss", "train/grad_norm", "time/rollout", "time/step"} <= set(trains[0])
    eps = list(read_traces(run / "traces.jsonl"))
    train_eps = [e for e in eps if e.meta["phase"] == "train"]
    assert sorted(e.meta["generation"] for e in train_eps) == list(range(8))
    assert all(e.meta["learner"] == "grpo" and e.meta["run"] == "run" and e.task_id == "apples" for e in train_eps)
    assert {e.task_id for e in eps if e.meta["phase"] == "eval"} == {"mix"}
    ckpts = sorted(p.name for p in (run / "checkpoints").glob("step_*"))
    assert ckpts == ["step_000002"] and (run / "checkpoints" / "latest").read_text().strip() == "step_000002"
    assert list((run / "tb").iterdir())  # TensorBoard events
    out = tmp_path / "exported"
    assert main(["export", str(run), "--out", str(out)]) == 0
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(out), local_files_only=True)
    AutoTokenizer.from_pretrained(str(out), local_files_only=True)
    from safetensors.torch import load_file

    saved = load_file(str(run / "checkpoints" / "step_000002" / "student" / "model.safetensors"))
    for k, v in saved.items():
        torch.testing.assert_close(model.state_dict()[k], v)
    assert not any("lora" in k or "qformer" in k for k in model.state_dict())
    assert {p.name for p in out.iterdir()} <= {"config.json", "generation_config.json", "model.safetensors",
                                                "tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
                                                "special_tokens_map.json", "lopd_defaults.json"}
    assert json.loads((out / "lopd_defaults.json").read_text())["max_turns"] == 2  # the run's, for lopd eval
    assert main(["export", str(run), "--out", str(out)]) == 2  # not empty: refused without --force


def test_bad_config_key_is_a_clear_error(tmp_path, capsys):
    assert main(["train", f"run_dir={tmp_path}", "optim.lrr=1"]) == 2
    assert "optim.lrr" in capsys.readouterr().err


def test_list_keys_documents_the_ablation_knobs(capsys):
    assert main(["train", "--list-keys"]) == 0
    out = capsys.readouterr().out
    for key in ("lopd.margin.margin", "lopd.margin.anchor_weight", "lopd.margin.dual_lr", "lopd.n_retrieved",
                "lopd.composer.qformer.n_latents", "grpo.clip_low", "sdpo.ema_rate", "eval.temperature"):
        assert key in out


@pytest.mark.slow
@pytest.mark.parametrize("learner", ["sft", "opsd", "sdpo", "lopd"])
def test_every_learner_trains_end_to_end_through_lopd_train(tmp_path, learner):
    traces = write_shop_expert_traces(tmp_path / "expert.jsonl")
    run = tmp_path / learner
    args = small_overrides(run, learner, traces, "generations=8", "eval.at_end=true")
    assert main(["train", *args]) == 0
    recs = read_metrics(run / "metrics.jsonl")
    steps = [r for r in recs if "train/loss" in r]
    assert [r["step"] for r in steps] == [1, 2] and recs[-1]["generations"] == 8 and "eval/reward" in recs[-1]
    if learner != "sdpo":  # SDPO's untrained student never succeeds here: no sibling, no signal (logged)
        assert all(r["train/grad_norm"] > 0 for r in steps)
    else:
        assert all(r["train/no_signal_frac"] == 1.0 for r in steps)
    assert (run / "checkpoints" / "latest").is_file()
