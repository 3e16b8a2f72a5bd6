"""The pinned base: a built micro-world base shipped with the project, so a fresh clone loads it
instead of training it (the default recipe costs about 23 CPU minutes; ``make demo`` has 10).

:func:`harness.basemodel.build.load_or_build_base` takes it on a cache miss when it was built from the
same :class:`BaseModelConfig` for the same world (the world code's fingerprint). Code outside the
world (the fit, the rollout layout) may have changed since; the cache key would then differ, and
the pinned base is still the model that recipe made. Re-pin after changing the recipe or the world::

    lopd pretrain --pin          # build (or load) the default base, then copy it here
    make pin-base                # the same

``tests/harness/test_pinned_base.py`` fails while the pinned base is stale, naming that command.

A train config names it as ``model: {path: "micro:pinned"}`` (:func:`harness.models.pinned.resolve_model_path`),
as the packaged configs do; ``lopd eval --model micro:pinned`` too.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from envs.micro.world import fingerprint
from harness.atomic_dir import build_dir
from harness.basemodel.config import BASE_VERSION
from harness.models import pinned
from harness.models.pinned import pinned_info


def stale_reason(config: dict[str, Any], pinned_dir: Path | None = None) -> str | None:
    """Why the pinned base cannot stand in for the base of ``config`` (a plain dict, as
    ``base_info.json`` holds it); None when it can."""
    info = pinned_info(pinned_dir)
    if info is None:
        return "no pinned base"
    if info.get("version") != BASE_VERSION:
        return f"built by base recipe version {info.get('version')}, now {BASE_VERSION}"
    pinned = info.get("config") or {}
    if pinned != config:
        changed = sorted(k for k in set(config) | set(pinned) if config.get(k) != pinned.get(k))
        return f"built from another config (differs in: {', '.join(changed)})"
    if info.get("world_fingerprint") != fingerprint():
        return f"built for another world (fingerprint {info.get('world_fingerprint')}, now {fingerprint()})"
    return None


def _copy_files(src: Path, dst: Path) -> None:
    """Copy the files of ``src`` into a new ``dst``, whole or not at all."""
    def copy(tmp: Path) -> None:
        for name in os.listdir(src):
            if (src / name).is_file():
                shutil.copy2(src / name, tmp / name)

    build_dir(dst, copy, "base_info.json")


def copy_pinned(target: Path, pinned_dir: Path | None = None) -> None:
    """Copy the pinned base to ``target`` (a cache folder)."""
    _copy_files(pinned_dir or pinned.PINNED_DIR, target)


def pin(base_path: str | os.PathLike, pinned_dir: Path | None = None) -> Path:
    """Replace the pinned base with the built base at ``base_path``. Returns the pinned folder."""
    src, dst = Path(base_path), pinned_dir or pinned.PINNED_DIR
    missing = [n for n in ("config.json", "model.safetensors", "tokenizer.json", "base_info.json")
               if not (src / n).is_file()]
    if missing:
        raise FileNotFoundError(f"{src} is not a built base (missing {', '.join(missing)})")
    if "world_fingerprint" not in (pinned_info(src) or {}):
        raise ValueError(f"{src} was built before bases recorded their world; rebuild it")
    if dst.exists():
        shutil.rmtree(dst)
    _copy_files(src, dst)
    return dst
