from dataclasses import dataclass, field
from typing import Literal

import pytest

from harness.config import ConfigError, config_and_overrides, field_docs, load_config, save_config, to_dict


@dataclass
class Optim:
    lr: float = 1e-5
    """Learning rate."""
    clip: float | None = 1.0
    """Gradient-norm clip; null disables it."""


@dataclass
class Run:
    name: str = "run"
    """Run name."""
    steps: int = 10
    """Training steps."""
    learner: Literal["grpo", "lopd"] = "grpo"
    """Which learner."""
    envs: list[str] = field(default_factory=lambda: ["lopd/shop-v0"])
    """Env ids."""
    optim: Optim = field(default_factory=Optim)
    """Optimiser settings."""


def test_yaml_then_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("steps: 5\noptim:\n  lr: 3.0e-4\nenvs: [a, b]\n")
    cfg = load_config(Run, path, ["learner=lopd", "optim.clip=null", "name=42"])
    assert cfg == Run(name="42", steps=5, learner="lopd", envs=["a", "b"], optim=Optim(lr=3e-4, clip=None))


def test_save_and_reload(tmp_path):
    cfg = load_config(Run, None, ["steps=7", "optim.lr=1e-3"])
    save_config(cfg, tmp_path / "saved.yaml")
    assert load_config(Run, tmp_path / "saved.yaml") == cfg
    assert to_dict(cfg)["optim"] == {"lr": 1e-3, "clip": 1.0}


@pytest.mark.parametrize("overrides, message", [
    (["stepz=3"], "unknown config key(s): stepz"),
    (["optim.beta=3"], "unknown config key(s): optim.beta"),
    (["steps=three"], "steps: expected an integer"),
    (["steps=true"], "steps: expected an integer"),
    (["learner=ppo"], "learner: 'ppo' is not one of"),
    (["optim=3"], "optim: expected a mapping"),
    (["envs=x"], "envs: expected a list"),
    (["noequals"], "is not key=value"),
    (["a..b=1"], "empty key"),
])
def test_bad_overrides_name_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config(Run, None, overrides)


def test_config_and_overrides(tmp_path, monkeypatch):
    """The optional CONFIG positional: a word with = that names no file is the first override."""
    monkeypatch.chdir(tmp_path)
    assert config_and_overrides("steps=3", ("optim.lr=1e-3",)) == (None, ["steps=3", "optim.lr=1e-3"])
    assert config_and_overrides("c.yaml", ["steps=3"]) == ("c.yaml", ["steps=3"])
    assert config_and_overrides(None, []) == (None, [])
    (tmp_path / "odd=name.yaml").write_text("steps: 5\n")  # a file whose name holds = stays the config
    assert config_and_overrides("odd=name.yaml", ["steps=3"]) == ("odd=name.yaml", ["steps=3"])
    path, overrides = config_and_overrides("steps=3", ["optim.lr=1e-3"])
    assert load_config(Run, path, overrides) == Run(steps=3, optim=Optim(lr=1e-3))


def test_bad_yaml_files(tmp_path):
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    (tmp_path / "broken.yaml").write_text("a: [\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(Run, tmp_path / "list.yaml")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(Run, tmp_path / "broken.yaml")


def test_field_docs():
    assert field_docs(Run)["steps"] == "Training steps."
    assert field_docs(Optim)["clip"] == "Gradient-norm clip; null disables it."
