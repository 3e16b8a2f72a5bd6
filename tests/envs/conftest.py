"""Fixtures shared by the benchmarks' env tests."""

import json
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def read_verdicts():
    """Reads a ``lopd score ... --out`` file: (its lines as dicts, (id, sample_index, pass) of each),
    in file order; ``id_key`` names the benchmark's id field."""

    def read(path: Path, id_key: str) -> tuple[list[dict[str, Any]], list[tuple[Any, int, bool]]]:
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        return lines, [(x[id_key], x["sample_index"], x["pass"]) for x in lines]

    return read


@pytest.fixture
def run_check_env():
    """Makes ``env_id`` (``gym.make(env_id, **make_kwargs)``), runs gymnasium's ``check_env`` on it,
    render check included, and closes it."""

    def check(env_id: str, **make_kwargs: Any) -> None:
        import gymnasium as gym
        from gymnasium.utils.env_checker import check_env

        env = gym.make(env_id, **make_kwargs)
        try:
            check_env(env.unwrapped, skip_render_check=False)
        finally:
            env.close()

    return check
