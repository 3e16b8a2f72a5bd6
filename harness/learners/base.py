"""The learner interface: what a training algorithm says, and what the trainer gives it.

The trainer (:mod:`harness.training.trainer`) owns the loop: the generation budget, task sampling,
rollouts, evaluation, logging and checkpoints. A learner owns one step's update: which
privileged context its teacher sees and which loss the student (and, for LOPD, the composer)
minimises. Learners are small modules over the shared code in :mod:`harness.learners.common`
and the losses in :mod:`lopd.losses`::

    class MyLearner(Learner):
        name = "mine"

        def train_step(self, batch: StepBatch) -> dict[str, float]:
            ctx = self.ctx

            def loss_fn(k, idx):                      # one micro-batch: forward with ctx.scorer
                ...
                return loss, {"tokens": n}            # loss normalised by the step's global counts

            sums = ctx.accumulate([len(r.traj.token_ids) for r in batch.rollouts], loss_fn, sums=["tokens"])
            return {**sums, **ctx.optimizer_step()}

    register_learner("mine", "my_package.mine:MyLearner")   # then `lopd train ... learner=mine`

A step's rollouts are split across ranks by whole groups (all G rollouts of a task on one
rank), so group statistics need no communication; anything global (token counts, means over
all rollouts) goes through :mod:`harness.distributed`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import torch

from envs.core import Task
from harness.distributed import DistInfo, max_over_ranks, sum_floats, sync_gradients
from harness.learners.registry import LEARNERS, get_learner, learner_config_type, register_learner
from harness.rollout import Trajectory

__all__ = ["LEARNERS", "Learner", "LearnerContext", "Rollout", "StepBatch", "get_learner", "learner_config_type",
           "register_learner"]



@dataclass
class Rollout:
    """One student episode of this step, in training form, with its task."""

    traj: Trajectory
    """Token ids, loss mask, sampling log-probs and the Episode record."""
    task: Task
    """The task the episode played."""
    group: int
    """Index of the task slot within the step (the G rollouts of one slot share it)."""
    index: int
    """Index of this rollout within the whole step (all ranks)."""

    @property
    def reward(self) -> float:
        return float(self.traj.episode.reward)

    @property
    def prompt_len(self) -> int:
        """Tokens before the first sampled token (the student's context)."""
        return len(self.traj.episode.prompt_token_ids or [])


@dataclass
class StepBatch:
    """What a learner updates on in one step (this rank's share)."""

    step: int
    """1-based index of the step being taken."""
    rollouts: list[Rollout]
    """This rank's rollouts: whole groups, in global index order."""
    n_global: int
    """Rollouts (or offline examples) in the whole step, all ranks together."""
    items: list[str] = field(default_factory=list)
    """For offline learners (SFT): the example ids this rank trains on this step."""


MicroLoss = Callable[[int, list[int]], tuple[torch.Tensor, dict[str, float]]]
"""``loss_fn(k, idx) -> (loss, metric sums)`` of micro-batch ``k`` (rows ``idx``): see
:meth:`LearnerContext.accumulate`."""


@dataclass
class LearnerContext:
    """Everything a learner may use. Built by the trainer; helpers keep learners short."""

    cfg: Any
    """The run's :class:`harness.training.train_config.TrainConfig` (typed loosely: learners sit below the trainer)."""
    student: torch.nn.Module
    """The plain causal LM being trained (unwrapped; for copies and weight reads)."""
    scorer: torch.nn.Module
    """The trainable forward: :class:`harness.learners.common.TokenScorer` over the student
    (FSDP-sharded with ``distributed.strategy=fsdp``). Gradients reach the student through it."""
    optimizer: torch.optim.Optimizer
    tokenizer: Any
    dist: DistInfo
    tasks: dict[str, Task]
    """Every task of the env (train and eval), by id."""
    env_id: str
    make_env: Callable[[], Any]
    """A fresh env instance (``gymnasium.make`` with the configured kwargs)."""
    initial_state: dict[str, torch.Tensor]
    """The student's weights before any training (frozen teachers, the GRPO reference)."""
    run_dir: Path
    full_state: Callable[[], dict[str, torch.Tensor]]
    """The student's full (unsharded) state dict, on every rank (a collective under FSDP)."""
    template: torch.nn.Module
    """An unsharded module of the student's architecture, for copies (never trained)."""
    teacher_engine: Any = None
    """The frozen initial model on inference servers (``engine.teacher_urls``/``teacher_launch``), scoring
    teachers as top-k log-probs; None: teachers are in-process copies
    (:func:`~harness.learners.common.frozen_teacher`)."""

    @property
    def device(self) -> torch.device:
        return self.dist.device

    @property
    def fsdp(self) -> bool:
        return self.dist.enabled and self.cfg.distributed.strategy == "fsdp"

    @property
    def template_kwargs(self) -> dict[str, Any]:
        return dict(self.cfg.rollout.template_kwargs)

    def frozen_copy(self, state: dict[str, torch.Tensor] | None = None) -> torch.nn.Module:
        """A frozen, eval-mode copy of the student architecture holding ``state`` (default: the
        initial weights): the frozen teacher, the GRPO reference, the SDPO EMA teacher."""
        from harness.learners.common import clone_model

        return clone_model(self.template, self.initial_state if state is None else state).to(self.device)

    # ---- the student's update: accumulate micro-batches, sync, clip, step ---------------
    def micro_batches(self, lengths: Sequence[int], groups: Sequence[Any] | None = None) -> list[list[int]]:
        """Consecutive index groups under ``cfg.micro_batch_tokens`` padded tokens each (``groups``:
        keys whose indices stay together). With FSDP, empty groups pad every rank to the same count
        (ranks must run equal forwards)."""
        from harness.learners.common import micro_batches

        mbs = micro_batches(lengths, self.cfg.micro_batch_tokens, groups)
        if self.fsdp:
            mbs += [[] for _ in range(max_over_ranks(len(mbs), self.dist) - len(mbs))]
        return mbs

    def accumulate(self, lengths: Sequence[int], loss_fn: MicroLoss, sums: Sequence[str] = (),
                   groups: Sequence[Any] | None = None, timer: Any = None,
                   after_backward: Callable[[], dict[str, float]] | None = None) -> dict[str, float]:
        """The micro-batch loop, the one every learner uses: zero the student's gradients, then per
        micro-batch (:meth:`micro_batches` of ``lengths``) ``loss, metrics = loss_fn(k, idx)`` and its
        backward; a rank's empty micro-batch joins FSDP's collectives with a dummy backward.

        ``loss_fn`` gets the micro-batch's number ``k`` and its row indices, and returns its loss,
        already normalised by GLOBAL counts (so the micro-batches' gradients add up to the step's),
        and additive metrics (sums over its rows or tokens) named in ``sums``. Returns ``loss`` and
        those sums over every micro-batch of every rank (the same on all ranks); the optimiser step
        is the caller's (:meth:`optimizer_step`). ``timer`` (:class:`~harness.learners.common.Timer`)
        counts the backward passes as ``student`` time. ``after_backward()``, when given, runs after each
        micro-batch's backward and returns more of those sums (LOPD's composer, once the student's graph is gone).

        >>> def loss_fn(k, idx):                                  # doctest: +SKIP
        ...     logp = token_log_probs(ctx.scorer(ids[idx], ...), targets[idx])
        ...     return -(logp * mask[idx]).sum() / n_tokens, {"tokens": float(mask[idx].sum())}
        >>> totals = ctx.accumulate(lengths, loss_fn, sums=["tokens"])   # doctest: +SKIP
        """
        totals = dict.fromkeys(["loss", *sums], 0.0)
        self.zero_grad()
        for k, idx in enumerate(self.micro_batches(lengths, groups)):
            if not idx:
                self.dummy_backward()
                continue
            loss, metrics = loss_fn(k, idx)
            with timer("student") if timer is not None else nullcontext():
                self.backward(loss)
            if after_backward is not None:
                metrics = {**metrics, **after_backward()}
            totals["loss"] += float(loss.detach())
            for name, value in metrics.items():
                totals[name] += float(value)
        return dict(zip(totals, sum_floats(list(totals.values()), self.dist)))

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def backward(self, loss: torch.Tensor) -> None:
        """Backward of a micro-batch loss already normalised by GLOBAL counts.

        FSDP's reduce-scatter averages over ranks; the loss is scaled by the world size so the
        result is the sum, as with ``ddp``.
        """
        (loss * self.dist.world if self.fsdp else loss).backward()

    def dummy_backward(self) -> None:
        """A zero-loss forward/backward, so an FSDP rank without data joins the collectives."""
        from harness.learners.common import dummy_pass

        self.backward(dummy_pass(self.scorer, self.device))

    def optimizer_step(self) -> dict[str, float]:
        """Sum gradients over ranks (ddp), clip to ``cfg.optim.grad_clip``, step. A non-finite
        gradient norm skips the update (and says so)."""
        params = [p for p in self.scorer.parameters() if p.requires_grad]
        if self.dist.enabled and not self.fsdp:
            sync_gradients(params, self.dist)
        clip = self.cfg.optim.grad_clip
        norm = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else float("inf"))
        norm = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
        skipped = not torch.isfinite(torch.tensor(norm)).item()
        if not skipped:
            self.optimizer.step()
        self.zero_grad()
        return {"grad_norm": norm, "skipped_update": float(skipped)}


C = TypeVar("C")
"""A learner's config section type (``Learner[GRPOConfig]``)."""


class Learner(ABC, Generic[C]):
    """One training algorithm, typed by its config section (``class GRPOLearner(Learner[GRPOConfig])``).
    See the module docstring."""

    name: ClassVar[str] = ""
    """The learner's name, and the name of its section in a train config (``grpo:``)."""
    Config: ClassVar[type | None] = None
    """The dataclass of the learner's section (``ctx.cfg.learner_config``); None: it takes none."""
    default_group_size: ClassVar[int] = 1
    """Rollouts per task in a step when the train config does not set ``group_size``."""
    uses_rollouts: ClassVar[bool] = True
    """False for offline learners (SFT), which train on dataset examples instead of rollouts."""

    def __init__(self, ctx: LearnerContext):
        self.ctx = ctx
        self.cfg: C = ctx.cfg.learner_config
        """This learner's section of the train config (an instance of ``Config``; None without one)."""

    @abstractmethod
    def train_step(self, batch: StepBatch) -> dict[str, float]:
        """Update on this step's batch; returns metrics that are already global (same on all ranks).

        Keys named ``time/...`` are phase timings in seconds (teacher, student, composer).
        """

    def dataset_ids(self) -> list[str]:
        """Offline learners: ids of every training example (sampled like tasks)."""
        raise NotImplementedError(f"{type(self).__name__} trains on rollouts")

    def state_dict(self) -> dict[str, Any]:
        """Learner state for checkpoints (teacher copies, composer, dual variable, optimisers)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state_dict`."""

    def save_files(self, directory: Path) -> None:
        """Write file state (e.g. the experience bank) into ``directory`` (rank 0 only)."""

    def load_files(self, directory: Path) -> None:
        """Inverse of :meth:`save_files` (every rank)."""


