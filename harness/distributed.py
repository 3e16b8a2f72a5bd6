"""Data parallelism for the trainer: process group set-up, collectives, gradient sync, sharding.

One process per rank (``torchrun --nproc_per_node N -m harness.training.trainer CONFIG.yaml``). Every rank
holds the same student (replicated, or sharded with FSDP2), plays its share of the step's
rollouts, and computes its part of the loss normalised by GLOBAL counts (tokens, rollouts), so
summing gradients over ranks gives the gradient of the whole batch:

- ``ddp``: replicated weights; after the micro-batches, :func:`sync_gradients` sums every
  gradient over ranks with one flattened all-reduce (DistributedDataParallel's semantics, without
  its wrapper, so ranks may run different numbers of micro-batches).
- ``fsdp``: ``torch.distributed.fsdp.fully_shard`` on each decoder layer and the root; the
  reduce-scatter in the last micro-batch's backward sums the gradients (ranks run equal numbers
  of micro-batches, see :func:`max_over_ranks`).

Everything degrades to no-ops in a single process::

    dist = init_distributed()          # reads RANK / WORLD_SIZE from torchrun; else world 1
    n = all_sum(torch.tensor(float(local_tokens)), dist)
    sync_gradients(model.parameters(), dist)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as tdist

from lopd.losses import upcast

T = TypeVar("T")


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits in the job."""

    rank: int = 0
    world: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device: str = "cpu", backend: str = "auto") -> DistInfo:
    """Join the torchrun job described by the environment (RANK, WORLD_SIZE, MASTER_ADDR...).

    Without those variables (a plain ``python`` or ``lopd train``) this is a world of one. The
    backend defaults to gloo on CPU and nccl on CUDA.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", str(rank)))
    dev = torch.device(device)
    if dev.type == "cuda":
        dev = torch.device("cuda", local if world > 1 else (dev.index or 0))
        torch.cuda.set_device(dev)
    if world <= 1:
        return DistInfo(0, 1, dev)
    if not tdist.is_initialized():
        be = ("nccl" if dev.type == "cuda" else "gloo") if backend == "auto" else backend
        tdist.init_process_group(be, rank=rank, world_size=world)
    return DistInfo(tdist.get_rank(), tdist.get_world_size(), dev)


def shutdown(dist: DistInfo) -> None:
    if dist.enabled and tdist.is_initialized():
        tdist.barrier()
        tdist.destroy_process_group()


def all_sum(x: torch.Tensor, dist: DistInfo) -> torch.Tensor:
    """Sum of ``x`` over ranks (a new tensor; ``x`` itself is untouched)."""
    if not dist.enabled:
        return x.clone()
    y = x.detach().clone()
    tdist.all_reduce(y, op=tdist.ReduceOp.SUM)
    return y


def sum_floats(values: Sequence[float], dist: DistInfo) -> list[float]:
    """Element-wise sum of a list of floats over ranks (fp64)."""
    t = all_sum(torch.tensor(list(values), dtype=torch.float64), dist)
    return [float(v) for v in t.tolist()]


def max_over_ranks(n: int, dist: DistInfo) -> int:
    """The largest ``n`` any rank holds."""
    if not dist.enabled:
        return n
    t = torch.tensor([n], dtype=torch.long)
    tdist.all_reduce(t, op=tdist.ReduceOp.MAX)
    return int(t.item())


def gather_objects(obj: T, dist: DistInfo) -> list[T]:
    """Every rank's ``obj`` (picklable) in rank order, on every rank."""
    if not dist.enabled:
        return [obj]
    out: list[Any] = [None] * dist.world
    tdist.all_gather_object(out, obj)
    return out


def broadcast_object(obj: T, dist: DistInfo, src: int = 0) -> T:
    """Rank ``src``'s ``obj`` on every rank."""
    if not dist.enabled:
        return obj
    box = [obj]
    tdist.broadcast_object_list(box, src=src)
    return box[0]


def barrier(dist: DistInfo) -> None:
    if dist.enabled:
        tdist.barrier()


def sync_gradients(params: Iterable[torch.nn.Parameter], dist: DistInfo) -> None:
    """Sum the gradients of ``params`` over ranks in place (one flattened all-reduce).

    A parameter without a gradient on some rank takes part as zeros, so every rank issues the
    same collective whatever its micro-batches touched.
    """
    if not dist.enabled:
        return
    params = [p for p in params if p.requires_grad]
    if not params:
        return
    flat = torch.cat([upcast(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
    tdist.all_reduce(flat, op=tdist.ReduceOp.SUM)
    offset = 0
    for p in params:
        n = p.numel()
        g = flat[offset:offset + n].view_as(p).to(p.dtype)
        if p.grad is None:
            p.grad = g.clone()
        else:
            p.grad.copy_(g)
        offset += n


def split_evenly(n: int, dist: DistInfo) -> range:
    """This rank's contiguous share of ``range(n)`` (the first ``n % world`` ranks get one more)."""
    base, extra = divmod(n, dist.world)
    start = dist.rank * base + min(dist.rank, extra)
    return range(start, start + base + (1 if dist.rank < extra else 0))


def apply_fsdp(root: torch.nn.Module, layers: Iterable[torch.nn.Module]) -> torch.nn.Module:
    """FSDP2: shard each decoder layer, then the root (embeddings, final norm, LM head)."""
    from torch.distributed.fsdp import fully_shard

    for layer in layers:
        fully_shard(layer)
    fully_shard(root)
    return root
