"""The vLLM worker's side of the in-memory weight sync: a worker extension for ``vllm serve``.

    PYTHONPATH=harness/engines/worker_ext vllm serve MODEL_DIR --worker-extension-cls lopd_vllm_receiver.WeightReceiver

(:func:`harness.engines.server.server_command` adds both for a launched server; start an attached
one the same way, with ``VLLM_SERVER_DEV_MODE=1`` for ``/collective_rpc``.) vLLM mixes the class into
every worker; the trainer drives it through ``POST /collective_rpc`` (vLLM's collective RPC API), and
the tensors travel over a ``torch.distributed`` process group of the trainer (rank 0) and the
server's workers (ranks 1..n): NCCL between GPUs, gloo on CPUs. The received weights go through the
worker's ``reload_weights(weights_iterator=...)``, vLLM's in-place reload, which re-runs each
layer's weight processing (the CPU backend's packed matrices included). Nothing touches a disk.

Only torch and the standard library are imported here: this module is loaded inside the vLLM
server's own environment, not the project's. The trainer's side is :mod:`harness.engines.weight_sync`;
both follow the wire format below, which is all they share.

Wire format of one sync: ``meta`` is JSON ``{"buckets": [[[name, dtype, shape], ...], ...]}``; each
bucket is one broadcast of a flat uint8 buffer holding its tensors' bytes in order, each starting at a
multiple of ``ALIGN`` bytes (so every tensor is a view of the buffer, never a copy).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist

PREFIX = "lopd-weight-sync"
"""Key prefix in the rendezvous store (the store may be shared with nothing else, but say whose keys they are)."""


ALIGN = 16
"""Byte alignment of each tensor in a bucket (a view as int64 or fp32 needs its offset divisible by 8)."""


def padded(nbytes: int) -> int:
    """``nbytes`` rounded up to a multiple of :data:`ALIGN`."""
    return -(-nbytes // ALIGN) * ALIGN


def dtype_of(name: str) -> torch.dtype:
    """``"bfloat16"`` -> ``torch.bfloat16``; anything else than a torch floating/int dtype is refused."""
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown dtype {name!r} in a weight-sync message")
    return dt


def make_group(host: str, port: int, rank: int, world_size: int, backend: str, timeout_s: float) -> Any:
    """A process group of its own (not torch.distributed's default one, which vLLM or DDP may hold)."""
    timeout = datetime.timedelta(seconds=timeout_s)
    store = dist.TCPStore(host, port, world_size, is_master=rank == 0, timeout=timeout, wait_for_workers=False)
    store = dist.PrefixStore(PREFIX, store)
    if backend == "gloo":
        return store, dist.ProcessGroupGloo(store, rank, world_size, timeout)
    if backend == "nccl":
        opts = dist.ProcessGroupNCCL.Options()
        opts._timeout = timeout
        return store, dist.ProcessGroupNCCL(store, rank, world_size, opts)
    raise ValueError(f"weight-sync backend must be gloo or nccl, got {backend!r}")


def unpack(group: Any, buckets: list[list[list[Any]]], device: torch.device) -> Iterator[tuple[str, torch.Tensor]]:
    """Receive each bucket (a broadcast from rank 0) and yield its tensors, one bucket in memory at a time."""
    for specs in buckets:
        shapes = [(name, dtype_of(dt), [int(s) for s in shape]) for name, dt, shape in specs]
        sizes = [torch.Size(shape).numel() * torch.empty((), dtype=dt).element_size() for _, dt, shape in shapes]
        buf = torch.empty(sum(padded(n) for n in sizes), dtype=torch.uint8, device=device)
        group.broadcast(buf, 0).wait()
        offset = 0
        for (name, dt, shape), size in zip(shapes, sizes):
            yield name, buf[offset:offset + size].view(dt).view(shape)
            offset += padded(size)


class WeightReceiver:
    """Mixed into each vLLM worker (``--worker-extension-cls lopd_vllm_receiver.WeightReceiver``)."""

    def lopd_sync_rank(self) -> int:
        """This worker's rank in the server (0..n-1): the trainer counts the answers to size the group."""
        return int(getattr(self, "rank", 0))

    def lopd_sync_init(self, host: str, port: str, world_size: str, backend: str, timeout_s: str) -> None:
        """Join the trainer's group as rank 1 + this worker's rank (blocks until every rank has joined)."""
        self.lopd_sync_close()
        store, group = make_group(host, int(port), 1 + self.lopd_sync_rank(), int(world_size), backend,
                                  float(timeout_s))
        self._lopd_sync = (store, group, backend)

    def lopd_sync_receive(self, meta: str) -> int:
        """Receive one full set of weights and reload them in place; returns the tensors loaded."""
        group = getattr(self, "_lopd_sync", None)
        if group is None:
            raise RuntimeError("lopd_sync_receive before lopd_sync_init")
        _, pg, backend = group
        buckets = json.loads(meta)["buckets"]
        # gloo moves host memory (the reload copies into the weights' device); NCCL lands on the GPU
        device = torch.device("cpu") if backend == "gloo" else getattr(self, "device", torch.device("cuda"))
        received = unpack(pg, buckets, device)
        count = [0]

        def counted() -> Iterator[tuple[str, torch.Tensor]]:
            for item in received:
                count[0] += 1
                yield item

        try:
            self.reload_weights(weights_iterator=counted())
        finally:
            for _ in received:  # keep in step with the sender even when the reload stopped early
                pass
        return count[0]

    def lopd_sync_close(self) -> None:
        """Leave the group (a new lopd_sync_init replaces it)."""
        group = getattr(self, "_lopd_sync", None)
        self._lopd_sync = None
        if group is not None and hasattr(group[1], "shutdown"):  # (store, group, backend)
            group[1].shutdown()
