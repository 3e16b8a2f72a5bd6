"""The pinned base: taken on a cache miss when it matches the config and the world, else built."""

import json

import pytest
import torch
from test_base_model import small_config  # one small base recipe for the tests

import harness.base_model as bm
from harness import pinned_base
from harness.base_model import BaseModelConfig, load_or_build_base


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A small base built into a cache, then pinned into a separate folder."""
    cache, pinned = tmp_path_factory.mktemp("cache"), tmp_path_factory.mktemp("pinned") / "base"
    model, _, info = load_or_build_base(small_config(), cache_dir=cache, progress=False)
    pinned_base.pin(info["path"], pinned)
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
    assert pinned_base.stale_reason(info["config"], pinned) is None
    other = bm._plain(small_config(n_plain=7))
    assert "n_plain" in pinned_base.stale_reason(other, pinned)
    assert pinned_base.stale_reason(info["config"], tmp_path / "none") == "no pinned base"
    moved = tmp_path / "moved"
    pinned_base.pin(pinned, moved)
    record = json.loads((moved / "base_info.json").read_text())
    record["world_fingerprint"] = "0" * 12
    (moved / "base_info.json").write_text(json.dumps(record))
    assert "another world" in pinned_base.stale_reason(info["config"], moved)


def test_pin_refuses_a_folder_that_is_not_a_built_base(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a built base"):
        pinned_base.pin(tmp_path, tmp_path / "out")


def test_the_shipped_pinned_base_is_current():
    if pinned_base.pinned_info() is None:
        pytest.skip(f"no pinned base is shipped ({pinned_base.PINNED_DIR})")
    reason = pinned_base.stale_reason(bm._plain(BaseModelConfig()))
    assert reason is None, f"the pinned base is stale ({reason}): re-pin it with `make pin-base`"
