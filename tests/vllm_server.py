"""A real vLLM server on the pinned base, for the slow server tests (built by `make vllm`).

One server per test session: :func:`vllm_server` launches it from an untied copy of the pinned base
(the form the trainer syncs; see harness.engines.server.write_sync_checkpoint). Tests that change its
weights put the base back with :func:`restore_base`.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from harness.engines.server import _VLLM_VENV_PYTHON, EngineConfig, open_servers, write_sync_checkpoint

PINNED = Path(__file__).resolve().parents[1] / "harness" / "pinned_base"
INSTALLED = _VLLM_VENV_PYTHON.parent.parent / ".installed"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require_vllm() -> None:
    if not INSTALLED.exists():
        pytest.skip(f"vLLM is not installed ({INSTALLED} missing): `make vllm` builds it (.ci/run does); "
                    "the real-server tests need it")


def pinned_model():
    import torch

    from harness.models import load_model

    return load_model(str(PINNED), dtype=torch.float32)


def untied_base(root: Path) -> Path:
    model, tok = pinned_model()
    return write_sync_checkpoint(model, model.state_dict(), tok, root / "base")


def launch_server(root: Path, **cfg) -> tuple[object, Path]:
    """(ServerPool of one launched vLLM server, the untied base dir it serves); skips without vLLM."""
    require_vllm()
    base = untied_base(root)
    model, tok = pinned_model()
    ec = EngineConfig(kind="vllm", launch=1, port=free_port(), startup_timeout=900, **cfg)
    pool = open_servers(ec, model_dir=str(base), log_dir=root / "logs", eos_token_ids=[tok.eos_token_id],
                        embedding=model.get_input_embeddings().weight.detach())
    return pool, base


def restore_base(pool, base: Path) -> None:
    """Put the session server back on the pinned base (after a test changed its weights)."""
    pool.update_weights(str(base))
