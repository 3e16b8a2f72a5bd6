"""Worker of tests/harness/test_distributed.py, run under torchrun.

    torchrun --nproc_per_node N tests/harness/dist_worker.py BATCH.pt OUT.pt key=value ...

Every rank loads the same global batch of rollouts, keeps its share of whole groups (as the
trainer's ``collect`` does), takes one learner step, and rank 0 saves the metrics and weights.
"""

from __future__ import annotations

import os
import sys

import torch

from harness.config import load_config
from harness.distributed import shutdown, split_evenly
from harness.learners.base import StepBatch
from harness.training.train_config import TrainConfig
from harness.training.trainer import Trainer


def main(batch_file: str, out_file: str, overrides: list[str]) -> None:
    torch.set_num_threads(1)
    if os.environ.get("LOPD_TEST_LOGITS_CHUNK"):  # the test's chunked-head case
        import lopd.chunked

        lopd.chunked.LOGITS_CHUNK = int(os.environ["LOPD_TEST_LOGITS_CHUNK"])
    trainer = Trainer(load_config(TrainConfig, None, overrides))
    rollouts = torch.load(batch_file, weights_only=False)
    groups = sorted({r.group for r in rollouts})
    mine = {groups[i] for i in split_evenly(len(groups), trainer.dist)}
    batch = StepBatch(1, [r for r in rollouts if r.group in mine], len(rollouts))
    metrics = trainer.learner.train_step(batch)
    state = {k: v.detach().cpu().clone() for k, v in trainer.full_state().items()}
    out = {"metrics": metrics, "student": state, "world": trainer.dist.world}
    if trainer.cfg.learner == "lopd":
        out["composer"] = trainer.learner.composer.trainable_state_dict()["trainable"]
        out["beta"] = trainer.learner.dual.value
        out["composer_lr"] = trainer.learner.optimizer.param_groups[0]["lr"]
    if trainer.dist.is_main:
        torch.save(out, out_file)
    trainer.close()
    shutdown(trainer.dist)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
    # gloo's worker threads can abort in C++ static destructors at interpreter exit ("terminate
    # called without an active exception", seen under load); the work is saved and the group
    # destroyed, so leave without running them.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
