"""The pinned base: taken on a cache miss when it matches the config and the world, else built."""

import json

import pytest
import torch
from test_base_model import small_config  # one small base recipe for the tests

import harness.basemodel.build as bm
from harness.basemodel import pin
from harness.basemodel.config import plain_config
from harness.models import pinned as pinned_base
from harness.basemodel.build import load_or_build_base
from harness.basemodel.config import BaseModelConfig


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A small base built into a cache, then pinned into a separate folder."""
    cache, pinned = tmp_path_factory.mktemp("cache"), tmp_path_factory.mktemp("pinned") / "base"
    model, _, info = load_or_build_base(small_config(), cache_dir=cache, progress=False)
    pin.pin(info["path"], pinned)
    return model, info, pinned


def test_a_cache_miss_copies_a_matching_pinned_base_instead_of_training(built, tmp_path, monkeypatch):
    model, _, pinned = built
    monkeypatch.setattr(pinned_base, "PINNED_DIR", pinned)
    monkeypatch.setattr(bm, "build_base", lambda *a, **k: pytest.fail("trained although a pinned base matched"))
    again, _, info2 = load_or_build_base(small_config(), cache_dir=tmp_path, progress=False)
    assert info2["pinned"] and not info2["cached"] and info2["path"].startswith(str(tmp_path))
    for (name, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    # from then on it is an ordinary cache hit
    assert load_or_build_base(small_config(), cache_dir=tmp_path, progress=False)[2]["cached"]


def test_a_pinned_base_of_another_config_or_world_is_stale(built, tmp_path):
    _, info, pinned = built
    assert pin.stale_reason(info["config"], pinned) is None
    other = plain_config(small_config(n_plain=7))
    assert "n_plain" in pin.stale_reason(other, pinned)
    assert pin.stale_reason(info["config"], tmp_path / "none") == "no pinned base"
    moved = tmp_path / "moved"
    pin.pin(pinned, moved)
    record = json.loads((moved / "base_info.json").read_text())
    record["world_fingerprint"] = "0" * 12
    (moved / "base_info.json").write_text(json.dumps(record))
    assert "another world" in pin.stale_reason(info["config"], moved)


def test_pin_refuses_a_folder_that_is_not_a_built_base(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a built base"):
        pin.pin(tmp_path, tmp_path / "out")


def test_the_shipped_pinned_base_is_current():
    if pinned_base.pinned_info() is None:
        pytest.skip(f"no pinned base is shipped ({pinned_base.PINNED_DIR})")
    reason = pin.stale_reason(plain_config(BaseModelConfig()))
    assert reason is None, f"the pinned base is stale ({reason}): re-pin it with `make pin-base`"


# ---- the micro:pinned alias (model.path, lopd eval --model) -----------------------------------------
def _needs_pinned():
    if pinned_base.pinned_info() is None:
        pytest.skip(f"no pinned base is shipped ({pinned_base.PINNED_DIR})")


def test_micro_pinned_resolves_to_the_pinned_folder_and_every_loader_takes_it(tmp_path):
    from safetensors.torch import load_file

    from harness.config import load_config
    from harness.evaluation.evaluate import EvalRunConfig, _settings, build_engine
    from harness.training.train_config import TrainConfig
    from harness.training.trainer import load_student

    _needs_pinned()
    assert pinned_base.resolve_model_path("micro:pinned") == str(pinned_base.PINNED_DIR)
    assert pinned_base.resolve_model_path("tiny:1m") == "tiny:1m"
    assert pinned_base.resolve_model_path("runs/x") == "runs/x"
    with pytest.raises(ValueError, match="unknown model alias 'micro:other'"):
        pinned_base.resolve_model_path("micro:other")
    saved = load_file(str(pinned_base.PINNED_DIR / "model.safetensors"))
    student, tok = load_student(load_config(TrainConfig, None, ["model.path=micro:pinned"]), torch.device("cpu"))
    weights = student.state_dict()
    assert saved and all(torch.equal(weights[k], v) for k, v in saved.items())
    assert tok.get_vocab() == build_engine(EvalRunConfig(envs=["lopd/shop-v0"], model="micro:pinned",
                                                         out=str(tmp_path)))[1].get_vocab()
    # a resumed eval sees the alias and its folder as one model
    as_dir = EvalRunConfig(envs=["lopd/shop-v0"], model=str(pinned_base.PINNED_DIR), out=str(tmp_path))
    as_alias = EvalRunConfig(envs=["lopd/shop-v0"], model="micro:pinned", out=str(tmp_path))
    assert _settings(as_alias)["model"] == _settings(as_dir)["model"]


def test_micro_pinned_without_a_pinned_folder_says_how_to_make_one(tmp_path, monkeypatch):
    from harness.config import load_config
    from harness.training.train_config import TrainConfig
    from harness.training.trainer import load_student

    monkeypatch.setattr(pinned_base, "PINNED_DIR", tmp_path / "none")
    with pytest.raises(FileNotFoundError, match="no pinned base at .*lopd pretrain --pin"):
        load_student(load_config(TrainConfig, None, ["model.path=micro:pinned"]), torch.device("cpu"))
