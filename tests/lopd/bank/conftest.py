"""Fixtures for the experience-bank tests: the real MiniLM embedder and a trace file."""

from __future__ import annotations

import pytest
from bank_fixtures import task_episodes

from envs.trace import write_traces


@pytest.fixture(scope="session")
def embedder():
    from lopd.bank import Embedder

    emb = Embedder(threads=1)  # one torch thread: much faster on the shared 2-core test machine
    emb.model  # load once for the whole session
    return emb


@pytest.fixture
def trace_file(tmp_path):
    path = tmp_path / "train.jsonl"
    write_traces(path, task_episodes())
    return path
