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
