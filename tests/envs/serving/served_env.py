"""``lopd serve`` for the tests that train or evaluate on a served env: skips when the server's venv
(.venv-openenv) cannot be built here (no PyPI), fails on any other start failure."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from envs.serving.spawn import ServeError, free_port, spawn_server

__all__ = ["free_port", "served"]


@contextlib.contextmanager
def served(env_id: str, *kwargs: str, max_sessions: int = 16) -> Iterator[str]:
    try:
        with spawn_server(env_id, *kwargs, max_sessions=max_sessions) as url:
            yield url
    except ServeError as e:
        if "make openenv" not in str(e):
            raise
        pytest.skip(f"lopd serve cannot build its venv: {str(e)[-600:]}")
