"""Folders that appear whole or not at all: build into a temp folder beside the target, then rename.

Every cached artefact (the base, a pinned-base copy, the demo's bank and cold start) is made this
way, so a crash or a parallel builder never leaves a half-written folder that a reader trusts::

    built = build_dir(cache / "bank-1f2e", lambda tmp: make_bank(tmp), marker="DONE")
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def build_dir(target: Path, build: Callable[[Path], object], marker: str) -> bool:
    """Make ``target`` with ``build(tmp)``; ``target / marker`` existing means complete (``build`` may
    write it; otherwise it is written after ``build`` returns). Returns False, building nothing, when
    ``target`` is already complete. An incomplete leftover is replaced; when a parallel builder
    finishes first, its copy is kept."""
    if (target / marker).is_file():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    try:
        build(tmp)
        if not (tmp / marker).exists():
            (tmp / marker).write_text("ok\n")
        if target.exists() and not (target / marker).is_file():
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.replace(tmp, target)
        except OSError:  # another builder finished first
            if not (target / marker).is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return True
