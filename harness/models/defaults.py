"""Run settings a model folder carries (``lopd_defaults.json``): the env and turn limits it was trained with.

A base trained for one world plays it well only with that world's prompt and turn limits: the pinned
micro base (``micro:pinned``) scores about 0.2 with the compact prompt, 96 tokens a turn and 8 turns, and
0 with the generic defaults of ``lopd eval`` (full prompt, 1,024 tokens, 30 turns), 15 times slower.
So the folder says what it wants, and ``lopd eval`` and ``lopd train`` take it wherever no flag or config
key is given (an explicit one always wins)::

    {"env": {"id": "lopd/micro-v0", "kwargs": {"seed": 0, "n_train": 600, "n_eval": 120, "prompt": "compact"}},
     "max_new_tokens": 96, "max_turns": 8, "max_context_tokens": 8192}

The env kwargs belong to that env: they apply only when it is the one played. ``lopd pretrain`` writes the
file into every base it builds; ``lopd export`` into the folders it exports from a run.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.config import PosInt

DEFAULTS_FILE = "lopd_defaults.json"


@dataclass
class ModelEnv:
    """The env a model was trained on."""

    id: str = ""
    """Its id (e.g. ``lopd/micro-v0``); empty: none in particular."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Its ``gym.make`` keyword arguments (the world, the prompt); used only when ``id`` is played."""


@dataclass
class ModelDefaults:
    """What a model folder asks of a run that does not say otherwise (None: no wish)."""

    env: ModelEnv = field(default_factory=ModelEnv)
    """The env it was trained on and how it was made."""
    max_new_tokens: PosInt | None = None
    """Tokens per assistant turn it was trained to fit in."""
    max_turns: PosInt | None = None
    """Assistant turns per episode."""
    max_context_tokens: PosInt | None = None
    """Tokens an episode may reach (its context length)."""

    def train_layer(self) -> dict[str, Any]:
        """The settings as a TrainConfig mapping (under the YAML file and overrides)."""
        out: dict[str, Any] = {}
        if self.env.id:
            out["env"] = {"id": self.env.id, "kwargs": dict(self.env.kwargs)}
        if self.max_new_tokens is not None:
            out["sampling"] = {"max_new_tokens": self.max_new_tokens}
        rollout = {k: v for k, v in (("max_turns", self.max_turns), ("max_context_tokens", self.max_context_tokens))
                   if v is not None}
        if rollout:
            out["rollout"] = rollout
        return out


def model_folder(model: str) -> Path | None:
    """The folder of a model path (``micro:pinned`` resolved); None for ``tiny:`` models and non-folders."""
    from harness.models.pinned import resolve_model_path

    path = resolve_model_path(model)
    return None if path.startswith("tiny:") or not Path(path).is_dir() else Path(path)


def read_model_defaults(model: str) -> tuple[ModelDefaults, Path] | None:
    """(the defaults, their file) of a model path, or None when its folder carries none."""
    from harness.config import ConfigError, from_dict

    folder = model_folder(model)
    path = folder / DEFAULTS_FILE if folder is not None else None
    if path is None or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ConfigError("the top level must be an object")
        return from_dict(ModelDefaults, data), path
    except (ValueError, UnicodeDecodeError) as e:  # ConfigError is a ValueError
        raise ValueError(f"{path}: not a model defaults file ({e}); fix or remove it") from None


def write_model_defaults(folder: str | os.PathLike, defaults: ModelDefaults) -> Path:
    from harness.config import to_dict

    path = Path(folder) / DEFAULTS_FILE
    path.write_text(json.dumps(to_dict(defaults), indent=1) + "\n", encoding="utf-8")
    return path
