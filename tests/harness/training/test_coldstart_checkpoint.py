"""A cold start killed midway and started again from its checkpoint computes the weights of an unbroken one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "learners"))
from learner_fixtures import small_overrides, write_shop_expert_traces  # noqa: E402

from harness.cli import main  # noqa: E402
from harness.metrics import read_metrics  # noqa: E402

STEPS = ["lopd.coldstart.steps=5", "lopd.coldstart.batch_size=2", "lopd.coldstart.lr=1e-2",
         "lopd.composer.qformer.n_latents=4"]


def _coldstart(tmp: Path, traces: Path, name: str, *flags: str, steps: list[str] = STEPS) -> int:
    args = small_overrides(tmp / name, "lopd", traces, *steps)
    return main(["coldstart", *args, "--traces", str(traces), *flags])


@pytest.mark.slow
def test_a_killed_cold_start_resumes_to_the_same_weights_and_metrics(tmp_path, monkeypatch, capsys):
    import lopd.coldstart

    torch.set_num_threads(1)
    traces = write_shop_expert_traces(tmp_path / "expert.jsonl")
    assert _coldstart(tmp_path, traces, "whole") == 0
    ckpt = tmp_path / "ckpt" / "cs.pt"
    real, calls = lopd.coldstart.coldstart_step, []

    def dies_at_step_4(*a, **k):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt  # killed after the checkpoint of step 2, before step 4's
        return real(*a, **k)

    monkeypatch.setattr(lopd.coldstart, "coldstart_step", dies_at_step_4)
    assert _coldstart(tmp_path, traces, "broken", "--checkpoint", str(ckpt), "--checkpoint-every", "2") == 130
    assert torch.load(ckpt, weights_only=True)["step"] == 2
    monkeypatch.setattr(lopd.coldstart, "coldstart_step", real)
    assert _coldstart(tmp_path, traces, "broken", "--checkpoint", str(ckpt), "--checkpoint-every", "2") == 0
    assert "resumed at step 2 of 5" in capsys.readouterr().out
    whole = torch.load(tmp_path / "whole" / "composer_coldstart.pt", weights_only=True)
    resumed = torch.load(tmp_path / "broken" / "composer_coldstart.pt", weights_only=True)
    for part in ("trainable", "anchor"):
        for name, t in whole[part].items():  # the same arithmetic in the same order: equal to the bit
            assert torch.equal(t, resumed[part][name]), (part, name)
    rows = [read_metrics(tmp_path / d / "coldstart_metrics.jsonl") for d in ("whole", "broken")]
    assert [r["step"] for r in rows[1]] == [1, 2, 3, 4, 5]
    assert [r["coldstart/loss"] for r in rows[0]] == [r["coldstart/loss"] for r in rows[1]]
    final = torch.load(ckpt, weights_only=True)
    assert final["step"] == 5 and final["optim"] is None  # finished: no optimiser state kept
    saved = ckpt.read_bytes()
    assert _coldstart(tmp_path, traces, "again", "--checkpoint", str(ckpt), "--checkpoint-every", "2") == 0
    assert "resumed at step 5 of 5" in capsys.readouterr().out
    assert ckpt.read_bytes() == saved  # a finished checkpoint is read, not written again
    again = torch.load(tmp_path / "again" / "composer_coldstart.pt", weights_only=True)
    assert all(torch.equal(t, again["trainable"][n]) for n, t in whole["trainable"].items())


def test_a_checkpoint_of_another_cold_start_is_refused(tmp_path, capsys):
    torch.set_num_threads(1)
    traces = write_shop_expert_traces(tmp_path / "expert.jsonl")
    ckpt = tmp_path / "cs.pt"
    one = ["lopd.coldstart.steps=1", "lopd.coldstart.batch_size=2", "lopd.composer.qformer.n_latents=4"]
    assert _coldstart(tmp_path, traces, "a", "--checkpoint", str(ckpt), steps=one) == 0
    two = ["lopd.coldstart.steps=2", *one[1:]]
    assert _coldstart(tmp_path, traces, "b", "--checkpoint", str(ckpt), steps=two) == 2
    assert "of another cold start" in capsys.readouterr().err
    ckpt.write_bytes(b"not a checkpoint")
    assert _coldstart(tmp_path, traces, "c", "--checkpoint", str(ckpt), steps=one) == 2
    assert "cannot be read" in capsys.readouterr().err
