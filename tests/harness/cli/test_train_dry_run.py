"""``lopd train CONFIG --dry-run``: the paper's configs (harness/configs/paper/) build and take one CPU step.

The steps run at test size: 2 layers (``model.num_hidden_layers``) of a narrow random model
(``model.random_shape``), float32, one or two rollouts of a few tokens. The shape table itself is checked
on the meta device (no memory) against the official parameter counts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.training.train_config import load_train_config

PAPER = Path(__file__).resolve().parents[3] / "harness" / "configs" / "paper"
CONFIGS = sorted(PAPER.glob("*.yaml"))
LOPD_ENVSCALER = str(PAPER / "lopd_envscaler_qwen3_4b.yaml")
GRPO_ENVSCALER = str(PAPER / "grpo_envscaler_qwen3_4b.yaml")
SMALL = ["model.num_hidden_layers=2", "model.dtype=float32", "sampling.max_new_tokens=8", "rollout.max_turns=1",
         "model.random_shape={hidden_size: 64, intermediate_size: 128, num_attention_heads: 4, "
         "num_key_value_heads: 2, head_dim: 16, vocab_size: 2048}"]
"""Test size: what the shape table's 2,560 x 151,936 embedding and 16k-token turns would make minutes."""


def _needs_data(cfg_path: str) -> None:
    from envs.data import DataNotFoundError
    from harness.env_source import open_env

    cfg = load_train_config(cfg_path)
    try:
        _, env = open_env(cfg.env)
        env.unwrapped.all_tasks()
    except DataNotFoundError as e:
        pytest.skip(f"{cfg.env.id}: {e}")
    env.close()


def _dry_run(capsys, *argv: str) -> str:
    rc = main(["train", *argv, "--dry-run", *SMALL])
    out = capsys.readouterr()
    assert rc == 0, out.out + out.err
    assert "Traceback" not in out.err
    return out.out


def test_there_are_the_four_paper_recipes():
    assert [p.stem for p in CONFIGS] == ["grpo_envscaler_qwen3_4b", "lopd_envscaler_qwen3_4b",
                                         "lopd_evalplus_qwen3_4b", "lopd_livecodebench_qwen3_8b"]


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_paper_config_loads_with_the_papers_numbers(path):
    cfg = load_train_config(str(path))
    assert (cfg.generations, cfg.rollouts_per_step, cfg.optim.lr, cfg.optim.grad_clip) == (1600, 32, 1e-5, 1.0)
    assert (cfg.sampling.temperature, cfg.sampling.top_p, cfg.sampling.top_k) == (0.7, 0.95, 20)
    assert cfg.engine.kind == "vllm" and cfg.distributed.strategy == "fsdp" and cfg.model.device == "cuda"
    text = path.read_text()
    assert text.startswith("# ") and "--dry-run" in text and "torchrun" in text  # where values come from, how to run
    if cfg.learner == "lopd":
        c = cfg.lopd
        assert (c.n_retrieved, c.allow_self_retrieval, c.composer.qformer.n_latents, c.composer.qformer.depth) == \
            (3, False, 32, 8)
        assert (c.composer.lora.r, c.composer.lora.alpha, c.distill.top_k, c.distill.direction) == (8, 16, 20, "reverse")
        assert (c.margin.margin, c.margin.dual_lr, c.margin.anchor_weight, c.composer_optim.lr) == (0.05, 0.5, 0.2, 1e-5)
        assert (c.coldstart.steps, c.coldstart.batch_size, c.coldstart.lr, c.coldstart.grad_clip) == (1000, 8, 1e-5, 3.0)
    else:
        assert (cfg.group_size, cfg.grpo.clip_low, cfg.grpo.clip_high) == (4, 0.2, 0.2)


def test_lopd_envscaler_dry_run_takes_one_step_and_reports_its_peak(capsys):
    _needs_data(LOPD_ENVSCALER)
    out = _dry_run(capsys, LOPD_ENVSCALER, "rollouts_per_step=1")
    assert "random weights at the shape of Qwen/Qwen3-4B's official config.json" in out
    assert "2 of 36 layers" in out
    assert "engine.kind=vllm -> hf" in out and "model.device=cuda -> cpu" in out
    assert "placeholder bank" in out and "-> random" in out  # no bank, no cold start on disk
    assert "one lopd step (1 rollout + the update)" in out
    assert "the step's peak RSS (VmHWM, reset before the step)" in out
    assert "memory model (harness.training.memory_model.predict_peak, device cpu):" in out  # the real one


def test_grpo_envscaler_dry_run_takes_one_step_and_reports_its_peak(capsys):
    _needs_data(GRPO_ENVSCALER)
    out = _dry_run(capsys, GRPO_ENVSCALER, "rollouts_per_step=2", "group_size=2")
    assert "random weights at the shape of Qwen/Qwen3-4B's" in out
    assert "one grpo step (2 rollouts + the update)" in out
    assert "peak RSS" in out and "GiB" in out
    assert "memory model (harness.training.memory_model.predict_peak, device cpu):" in out


@pytest.mark.parametrize("path", [p for p in CONFIGS if "envscaler" not in p.name],
                         ids=[p.stem for p in CONFIGS if "envscaler" not in p.name])
def test_the_code_configs_dry_run_when_their_data_is_here(path, capsys):
    _needs_data(str(path))
    out = _dry_run(capsys, str(path), "rollouts_per_step=1")
    assert "one lopd step" in out and "peak RSS" in out


def test_a_missing_data_dir_is_a_message_naming_it_before_any_model(monkeypatch, tmp_path, capsys):
    import harness.training.dry_run as dr

    def no_model(*a, **k):
        raise AssertionError("the model was built before the data was checked")

    monkeypatch.setattr(dr, "build_random_student", no_model)
    monkeypatch.setenv("LOPD_DATA_DIR", str(tmp_path / "nodata"))
    rc = main(["train", LOPD_ENVSCALER, "--dry-run", *SMALL])
    err = capsys.readouterr().err
    assert rc == 2
    assert "lopd/envscaler-v0 needs benchmark data that is not here" in err and "LOPD_DATA_DIR" in err
    assert str(tmp_path / "nodata") in err and "Traceback" not in err


def test_the_shape_table_gives_the_official_parameter_counts():
    """Qwen3-4B: 4.0B parameters, 3.6B without the embedding; Qwen3-8B: 8.2B, 6.95B (the model cards)."""
    import torch

    from harness.models.shapes import QWEN3_CONFIGS, random_qwen3
    from harness.models.tokenizer import build_tokenizer

    tok = build_tokenizer()
    for name, total, body in (("Qwen/Qwen3-4B", 4.02e9, 3.6e9), ("Qwen/Qwen3-8B", 8.19e9, 6.95e9)):
        with torch.device("meta"):
            model = random_qwen3(QWEN3_CONFIGS[name], tok)
        n = sum(p.numel() for p in model.parameters())
        emb = model.get_input_embeddings().weight.numel()
        assert abs(n - total) / total < 0.01, (name, n)
        assert abs(n - emb * (1 if model.config.tie_word_embeddings else 2) - body) / body < 0.01, (name, n)


def test_model_plan_reads_the_table_or_a_config_json(tmp_path):
    import json

    from harness.training.dry_run import model_plan

    cfg = load_train_config(None, ["model.path=Qwen/Qwen3-8B"])
    _, shape, source = model_plan(cfg)
    assert shape["hidden_size"] == 4096 and "Qwen/Qwen3-8B" in source
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 96, "num_hidden_layers": 3}))
    _, shape, source = model_plan(load_train_config(None, [f"model.path={tmp_path}"]))
    assert shape["hidden_size"] == 96 and source.endswith("config.json")
    assert model_plan(load_train_config(None, ["model.path=micro:pinned"]))[1] is None  # weights on disk: loaded


def test_num_hidden_layers_keeps_a_loaded_models_first_layers():
    import torch

    from harness.training.trainer import load_student

    model, _ = load_student(load_train_config(None, ["model.path=micro:pinned", "model.num_hidden_layers=1"]),
                            torch.device("cpu"))
    assert model.config.num_hidden_layers == 1 and len(model.get_decoder().layers) == 1


def test_the_memory_models_prediction_is_printed_beside_the_measured_peak(monkeypatch, capsys):
    """The hook (``dry_run.memory_prediction``): ``harness.training.memory_model.predict_peak(cfg, hf_config,
    device="cpu").total`` when the module exists; here a stand-in."""
    import sys
    import types

    seen = {}

    def predict_peak(cfg, hf_config, tokens=None, device="cuda"):
        seen.update(learner=cfg.learner, layers=hf_config.num_hidden_layers, device=device)
        return types.SimpleNamespace(total=3 * 1024 ** 3)

    monkeypatch.setitem(sys.modules, "harness.training.memory_model",
                        types.SimpleNamespace(predict_peak=predict_peak))
    rc = main(["train", "--dry-run", "learner=grpo", "rollouts_per_step=4", "sampling.max_new_tokens=4",
               "model.num_hidden_layers=2"])
    out = capsys.readouterr().out
    assert rc == 0
    assert seen == {"learner": "grpo", "layers": 2, "device": "cpu"}
    assert "memory model (harness.training.memory_model.predict_peak, device cpu): 3.00 GiB predicted against" in out
    assert "model: tiny:1m, as the run loads it, first 2 layers" in out
