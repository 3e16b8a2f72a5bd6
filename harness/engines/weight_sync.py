"""The trainer's side of the in-memory weight sync to a vLLM server (no checkpoint folder on the path).

    sync = CollectiveSync(engine.http, host="127.0.0.1", backend="gloo")   # "nccl" between GPUs
    sync.connect()                    # once: the trainer is rank 0 of a group with the server's workers
    sync.send(student.state_dict())   # after each optimizer step: broadcast, the server reloads in place
    sync.close()

The server runs :class:`harness.engines.worker_ext.lopd_vllm_receiver.WeightReceiver` as its worker extension
(``--worker-extension-cls``; a launched server has it) and is driven through vLLM's ``/collective_rpc``.
Each sync packs the tensors into flat byte buckets of at most ``bucket_bytes`` (a larger tensor gets a
bucket of its own) and broadcasts them one by one while the workers unpack each into the model:
the server holds one bucket beside its weights, never a second copy of the model.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_EXCEPTION, Future, wait
from typing import Any

import torch

from harness.engines.base import EngineError
from harness.engines.http import HTTPStatusError, JSONClient, ServerFeatureError
from harness.engines.worker_ext.lopd_vllm_receiver import make_group, padded

BUCKET_BYTES = 256 << 20
"""Bytes a broadcast carries at most: large enough that the per-message cost vanishes, small enough that
the server's staging buffer stays a fraction of a layer at 8B."""


class WeightSyncUnavailable(EngineError):
    """The server cannot take weights in memory (no receiver extension, or no ``/collective_rpc``)."""


def untied(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` with the LM head as its own entry: servers load the untied form (see write_sync_checkpoint)."""
    sd = dict(state)
    emb = next((k for k in sd if k.endswith("embed_tokens.weight")), None)
    if emb is not None and "lm_head.weight" not in sd:
        sd["lm_head.weight"] = sd[emb]
    return sd


def buckets(state: Mapping[str, torch.Tensor], bucket_bytes: int = BUCKET_BYTES) -> list[list[tuple[str, torch.Tensor]]]:
    """The tensors in order, grouped so each group's bytes stay within ``bucket_bytes`` (or one tensor)."""
    out: list[list[tuple[str, torch.Tensor]]] = []
    size = bucket_bytes
    for name, t in state.items():
        n = padded(t.numel() * t.element_size())
        if not out or size + n > bucket_bytes:
            out.append([])
            size = 0
        out[-1].append((name, t))
        size += n
    return out


def pack(tensors: list[torch.Tensor]) -> torch.Tensor:
    """One bucket's wire bytes: each tensor's bytes, zero-padded to the receiver's alignment."""
    parts = []
    for t in tensors:
        raw = t.contiguous().reshape(-1).view(torch.uint8)
        parts.append(raw)
        if padded(raw.numel()) > raw.numel():
            parts.append(raw.new_zeros(padded(raw.numel()) - raw.numel()))
    return torch.cat(parts)


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _both(rpc: Callable[[], Any], collective: Callable[[], Any]) -> Any:
    """Run the HTTP call and the collective side by side; the first failure is raised at once (the other
    side would otherwise wait out the group's timeout). Returns the HTTP call's answer."""
    futures: list[Future] = [Future(), Future()]

    def run(fn: Callable[[], Any], fut: Future) -> None:
        try:
            fut.set_result(fn())
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            fut.set_exception(e)

    threads = [threading.Thread(target=run, args=(fn, f), daemon=True) for fn, f in zip((rpc, collective), futures)]
    for t in threads:
        t.start()
    done, _ = wait(futures, return_when=FIRST_EXCEPTION)
    for f in done:
        if f.exception() is not None:
            raise f.exception()
    return futures[0].result()


class CollectiveSync:
    """One vLLM server's weight-sync group: this process is rank 0, the server's workers ranks 1..n."""

    def __init__(self, http: JSONClient, *, host: str = "127.0.0.1", backend: str = "gloo",
                 timeout_s: float = 300.0, bucket_bytes: int = BUCKET_BYTES):
        if backend not in ("gloo", "nccl"):
            raise ValueError(f"weight-sync backend must be gloo or nccl, got {backend!r}")
        self.http, self.host, self.backend = http, host, backend
        self.timeout_s, self.bucket_bytes = timeout_s, bucket_bytes
        self._group: Any = None
        self._store: Any = None

    def _rpc(self, method: str, timeout: float | None = None, **kwargs: Any) -> list[Any]:
        payload = {"method": method, "kwargs": {k: str(v) for k, v in kwargs.items()}, "timeout": timeout}
        out = self.http.request("POST", "/collective_rpc", payload, timeout=timeout, retries=0)
        return (out or {}).get("results", []) if isinstance(out, dict) else []

    def workers(self) -> int:
        """How many workers the server has; :class:`WeightSyncUnavailable` when it has no receiver."""
        try:
            ranks = self._rpc("lopd_sync_rank", timeout=60.0)
        except ServerFeatureError as e:
            raise WeightSyncUnavailable(f"{e}: start the vLLM server with VLLM_SERVER_DEV_MODE=1") from None
        except HTTPStatusError as e:
            raise WeightSyncUnavailable(
                f"the vLLM server at {self.http.base_url} has no weight receiver ({e.detail[:200]}): start it with "
                "PYTHONPATH=harness/engines/worker_ext and --worker-extension-cls lopd_vllm_receiver.WeightReceiver") from None
        if not ranks:
            raise WeightSyncUnavailable(f"the vLLM server at {self.http.base_url} reported no workers")
        return len(ranks)

    def connect(self) -> None:
        """Form the group (once; again after :meth:`close`)."""
        self.close()
        world = 1 + self.workers()
        port = free_port(self.host)
        box: dict[str, Any] = {}

        def join() -> None:
            box["store"], box["group"] = make_group(self.host, port, 0, world, self.backend, self.timeout_s)

        _both(lambda: self._rpc("lopd_sync_init", timeout=self.timeout_s, host=self.host, port=port,
                                world_size=world, backend=self.backend, timeout_s=self.timeout_s), join)
        self._store, self._group = box["store"], box["group"]

    @property
    def connected(self) -> bool:
        return self._group is not None

    def send(self, state: Mapping[str, torch.Tensor]) -> int:
        """Broadcast ``state`` (every tensor the server's model loads) and wait until the server has reloaded;
        returns the tensors the server loaded."""
        if self._group is None:
            raise EngineError("CollectiveSync.send before connect()")
        device = torch.device("cpu") if self.backend == "gloo" else torch.device("cuda", torch.cuda.current_device())
        groups = buckets({k: v.detach() for k, v in untied(state).items()}, self.bucket_bytes)
        meta = json.dumps({"buckets": [[[n, str(t.dtype).removeprefix("torch."), list(t.shape)] for n, t in g]
                                       for g in groups]})

        def broadcast() -> None:
            for g in groups:
                self._group.broadcast(pack([t.to(device) for _, t in g]), 0).wait()

        loaded = _both(lambda: self._rpc("lopd_sync_receive", timeout=self.timeout_s, meta=meta), broadcast)
        return int(loaded[0]) if loaded else 0

    def close(self) -> None:
        group, self._group, self._store = self._group, None, None
        if group is not None and hasattr(group, "shutdown"):
            group.shutdown()
