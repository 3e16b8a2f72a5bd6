"""A run folder keeps the record of what trained it: the rule for training into an existing ``run_dir``.

``run_dir/config.yaml`` describes every step in the folder. A rerun with the same settings resumes
from the newest checkpoint. A rerun whose settings differ in a key that determines the weights (``optim.lr``,
``seed``, the env, the model, the learner's own section, ...) is refused, naming each key (old -> new),
unless asked for with ``lopd train --allow-config-change`` (``Trainer(cfg, allow_config_change=True)``).

The keys in :data:`FREE` may differ without asking: they decide where and how fast a run goes, what it
logs, evaluates and keeps, not the weights of its steps. ``generations`` is one of them: no schedule depends
on the budget, so a larger one continues the same recipe. Every change, free or asked for, is recorded: the
old config is kept as ``config.N.yaml`` and ``config_changes.jsonl`` gets a line (the step it applies from,
the keys old -> new, whether it was forced). Only the chosen learner's section is compared.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.models.identity import same_model
from harness.training.train_config import TrainConfig

FREE = ("run_dir", "generations", "micro_batch_tokens", "model.device", "model.logits_chunk",
        "model.gradient_checkpointing", "lopd.teacher_graph", "engine.", "eval.", "checkpoint.", "log.",
        "distributed.")
"""Keys (a trailing dot: a whole section) that may differ on a rerun: none of them sets what a step
trains on or how it updates (engine and device change float error and sampling streams, not the recipe)."""
CONFIG, CHANGES = "config.yaml", "config_changes.jsonl"
_UNSET = "(unset)"


class ConfigChangeError(ValueError):
    """A rerun into a run folder with settings that would change its weights."""


@dataclass
class ConfigChange:
    """How this run's settings differ from those its folder recorded."""

    changed: dict[str, tuple[Any, Any]]
    """Dotted key -> (recorded value, new value)."""
    forced: bool
    """Whether a key outside :data:`FREE` changed (so ``--allow-config-change`` was needed)."""

    def describe(self) -> str:
        return ", ".join(f"{k}: {_show(a)} -> {_show(b)}" for k, (a, b) in self.changed.items())


def _show(v: Any) -> str:
    return v if v == _UNSET else json.dumps(v)


def flat_settings(cfg: TrainConfig) -> dict[str, Any]:
    """Every setting of ``cfg`` by dotted key; of the learner sections only the chosen learner's."""
    from harness.config import flat_keys, to_dict
    from harness.learners.registry import get_learner

    data = to_dict(cfg)
    own = {f.name for f in dataclasses.fields(TrainConfig) if not f.metadata.get("sections")}
    mine = {k: v for k, v in data.items() if k in own}
    if cfg.learner_config is not None:
        mine[get_learner(cfg.learner).name] = to_dict(cfg.learner_config)
    return flat_keys(mine)


def is_free(key: str) -> bool:
    return any(key == f or (f.endswith(".") and key.startswith(f)) for f in FREE)


def check_rerun(cfg: TrainConfig, allow_change: bool = False) -> ConfigChange | None:
    """How ``cfg`` differs from the config its ``run_dir`` recorded (None: no record, or the same settings).
    Raises :class:`ConfigChangeError` naming the keys when one outside :data:`FREE` differs and
    ``allow_change`` is false."""
    from harness.config import load_config

    path = Path(cfg.run_dir) / CONFIG
    if not path.is_file():
        return None
    try:
        old = flat_settings(load_config(TrainConfig, path))
    except (ValueError, KeyError) as e:  # e.g. written by an older version, or a plugin learner gone
        if not allow_change:
            raise ConfigChangeError(f"{path} cannot be read as a train config ({e}); use another run_dir, or "
                                    "--allow-config-change to continue the run with this config") from None
        return ConfigChange({"config.yaml": ("unreadable", str(e)[:200])}, forced=True)
    new = flat_settings(cfg)
    changed = {k: (old.get(k, _UNSET), new.get(k, _UNSET)) for k in sorted(set(old) | set(new))
               if k != "run_dir" and old.get(k, _UNSET) != new.get(k, _UNSET)}
    if "model.path" in changed and same_model(*changed["model.path"]):
        del changed["model.path"]  # the same base under a cache folder named by newer code
    if not changed:
        return None
    change = ConfigChange(changed, forced=any(not is_free(k) for k in changed))
    if change.forced and not allow_change:
        fixed = ConfigChange({k: v for k, v in changed.items() if not is_free(k)}, True)
        raise ConfigChangeError(
            f"{cfg.run_dir} holds a run trained with other settings: {fixed.describe()}. Rerun with its settings "
            f"to resume (see {path}), use another run_dir, or pass --allow-config-change to continue it with "
            "these (the old config is then kept as config.N.yaml)")
    return change


def record_change(run_dir: str | Path, change: ConfigChange, step: int, generations: int) -> Path:
    """Keep the folder's old config as ``config.N.yaml`` and log the change in ``config_changes.jsonl``
    (never truncated on resume, unlike metrics.jsonl). Returns the kept file."""
    run_dir = Path(run_dir)
    taken = [int(p.name.split(".")[1]) for p in run_dir.glob("config.*.yaml") if p.name.split(".")[1].isdigit()]
    kept = run_dir / f"config.{max(taken, default=0) + 1}.yaml"
    (run_dir / CONFIG).replace(kept)
    line = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "from_step": step, "generations": generations,
            "kept_as": kept.name, "forced": change.forced,
            "changed": {k: [a, b] for k, (a, b) in change.changed.items()}}
    with open(run_dir / CHANGES, "a", encoding="utf-8") as f:
        f.write(json.dumps(line, default=str) + "\n")
    return kept
