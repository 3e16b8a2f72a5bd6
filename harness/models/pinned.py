"""The packaged micro-world base (harness/pinned_base/) and its model-path alias ``micro:pinned``.

A train config names it as ``model: {path: "micro:pinned"}`` (:func:`resolve_model_path`), as the packaged
configs do; ``lopd eval --model micro:pinned`` too. :mod:`harness.basemodel.pin` makes and checks it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PINNED_DIR = Path(__file__).resolve().parents[1] / "pinned_base"
"""Where the pinned base lies (a ``save_pretrained`` folder with ``base_info.json``)."""


PINNED_ALIAS = "micro:pinned"
"""The model path that stands for :data:`PINNED_DIR` (``model.path``, ``lopd eval --model``)."""


def resolve_model_path(path: str) -> str:
    """``path`` as a loader takes it: :data:`PINNED_ALIAS` becomes the pinned folder; anything else
    (a directory, ``tiny:<preset>``) is returned as it is.

    >>> resolve_model_path("tiny:1m")
    'tiny:1m'
    """
    if path != PINNED_ALIAS:
        if path.startswith("micro:"):
            raise ValueError(f"unknown model alias {path!r}; the micro world's base is {PINNED_ALIAS!r}")
        return path
    missing = [n for n in ("base_info.json", "config.json", "model.safetensors", "tokenizer.json")
               if not (PINNED_DIR / n).is_file()]
    if missing:
        raise FileNotFoundError(f"model {PINNED_ALIAS}: no pinned base at {PINNED_DIR} (missing {', '.join(missing)}); "
                                "build and pin one with `lopd pretrain --pin` (or `make pin-base`)")
    return str(PINNED_DIR)


def pinned_info(pinned_dir: Path | None = None) -> dict[str, Any] | None:
    """The pinned base's ``base_info.json``, or None when there is none (or it cannot be read)."""
    path = (pinned_dir or PINNED_DIR) / "base_info.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
