"""A learner registered from outside the package trains through `lopd train` with its own section.

``ReinforceLearner`` below is the whole plugin: a config dataclass, a loss per micro-batch, the
framework's loop (``ctx.accumulate``) and optimiser step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import yaml
from learner_fixtures import small_overrides

from harness.cli import main
from harness.distributed import sum_floats
from harness.learners.base import LEARNERS, Learner, StepBatch, register_learner
from harness.learners.common import pad_id, pad_rows
from harness.metrics import read_metrics
from lopd.losses import token_log_probs
from lopd.supervision import align_supervision


@dataclass
class ReinforceConfig:
    """The plugin's own section (``reinforce:``)."""

    baseline: float = 0.5
    """Subtracted from every reward."""
    scale: float = 1.0
    """Multiplies the loss."""


class ReinforceLearner(Learner[ReinforceConfig]):
    """REINFORCE with a constant baseline: -(r - b) * mean log-prob of the sampled tokens."""

    name = "reinforce"
    Config = ReinforceConfig

    def train_step(self, batch: StepBatch) -> dict[str, float]:
        ctx, rs = self.ctx, batch.rollouts
        rows, masks = [r.traj.token_ids for r in rs], [r.traj.loss_mask for r in rs]
        n_tok = sum_floats([sum(map(sum, masks))], ctx.dist)[0]

        def loss_fn(k: int, idx: list[int]) -> tuple[torch.Tensor, dict[str, float]]:
            r, m = [rows[i] for i in idx], [masks[i] for i in idx]
            al = align_supervision(r, m, r, m, check_tokens=False)
            ids, attn = pad_rows(r, pad_id(ctx.tokenizer), ctx.device)
            logp = token_log_probs(ctx.scorer(ids, attn, positions=al.student_pos), al.targets)
            adv = torch.tensor([rs[i].reward - self.cfg.baseline for i in idx], dtype=logp.dtype)
            loss = -(adv[:, None] * logp * al.mask).sum() * self.cfg.scale / max(n_tok, 1.0)
            return loss, {"adv": float(adv.sum())}

        sums = ctx.accumulate([len(r) for r in rows], loss_fn, ["adv"])
        return {"loss": sums["loss"], "adv_mean": sums["adv"] / max(len(rs), 1), "scale": self.cfg.scale,
                **ctx.optimizer_step()}


def test_a_registered_plugin_trains_with_its_own_config_section(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(LEARNERS, "reinforce", "")  # undone after the test
    register_learner("reinforce", f"{__name__}:ReinforceLearner")
    run = tmp_path / "run"
    args = small_overrides(run, "reinforce", None, "generations=8", "reinforce.scale=0.5", "reinforce.baseline=0.25")
    assert main(["train", *args]) == 0
    trains = [r for r in read_metrics(run / "metrics.jsonl") if "train/loss" in r]
    assert len(trains) == 2 and all(r["train/scale"] == 0.5 and r["train/grad_norm"] > 0 for r in trains)
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["learner"] == "reinforce" and saved["reinforce"] == {"baseline": 0.25, "scale": 0.5}
    # the section is typed: a wrong key or value is a clear error naming it
    assert main(["train", *small_overrides(tmp_path / "bad", "reinforce", None, "reinforce.nope=1")]) == 2
    assert "reinforce.nope" in capsys.readouterr().err
    # and --list-keys documents it like the built-ins
    assert main(["train", "--list-keys"]) == 0
    assert "reinforce.baseline" in capsys.readouterr().out


def test_a_plugin_named_by_its_module_needs_no_registration(tmp_path):
    run = tmp_path / "run"
    args = small_overrides(run, f"{__name__}:ReinforceLearner", None, "generations=4", "reinforce.scale=2")
    assert main(["train", *args]) == 0
    assert [r["train/scale"] for r in read_metrics(run / "metrics.jsonl") if "train/loss" in r] == [2.0]
