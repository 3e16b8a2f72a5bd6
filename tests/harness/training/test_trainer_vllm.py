"""Training through a REAL vLLM server (`make vllm`): rollouts on the server, updates in-process, weights
synced back after every step; a dead server is named; a restart resumes exactly; bad servers are
refused before any training."""

from __future__ import annotations

import math
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "learners"))
sys.path.insert(0, str(Path(__file__).parents[1] / "engines"))
from learner_fixtures import small_overrides, write_shop_expert_traces  # noqa: E402
from vllm_server import PINNED, free_port, launch_server, restore_base  # noqa: E402

from harness.config import load_config  # noqa: E402
from harness.engines import HFEngine, SamplingParams  # noqa: E402
from harness.engines.base import EngineError  # noqa: E402
from harness.engines.http import ServerUnavailableError  # noqa: E402
from harness.metrics import read_metrics  # noqa: E402
from harness.training.train_config import TrainConfig  # noqa: E402
from harness.training.trainer import Trainer  # noqa: E402

pytestmark = pytest.mark.slow


def config(run: Path, learner: str, traces: Path, *extra: str) -> TrainConfig:
    return load_config(TrainConfig, None, small_overrides(run, learner, traces, f"model.path={PINNED}", *extra))


def comparable(run: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in read_metrics(run / "metrics.jsonl")]


def same(a: list[dict], b: list[dict]) -> bool:
    """Equal records: the updates run in-process on the same tokens, so only float noise of the
    same operations in the same order could differ (none: both runs are one process's arithmetic)."""
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(math.isclose(x[k], y[k], rel_tol=1e-12, abs_tol=1e-12)
                                     if isinstance(x[k], float) else x[k] == y[k] for k in x)
        for x, y in zip(a, b))


@pytest.fixture(scope="module")
def second_server(tmp_path_factory):
    """Another real server on the pinned base (teacher tests; the wrong-model test, last, breaks it)."""
    pool, base = launch_server(tmp_path_factory.mktemp("second"))
    yield pool, base
    pool.close()


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    return write_shop_expert_traces(tmp_path_factory.mktemp("traces") / "expert.jsonl")


@pytest.mark.parametrize("learner,sync", [("grpo", "collective"), ("lopd", "collective"), ("grpo", "disk")])
def test_two_steps_through_the_server_equal_the_hf_engine_run(learner, sync, vllm_server, traces, tmp_path):
    pool, base = vllm_server
    extra = ["generations=8", "sampling.temperature=0.0", "sampling.max_new_tokens=16", "grpo.kl_coef=0.1"]
    hf = Trainer(config(tmp_path / "hf", learner, traces, *extra))
    try:
        hf.run()
    finally:
        hf.close()
    srv = Trainer(config(tmp_path / "vllm", learner, traces, *extra, "engine.kind=vllm",
                         f"engine.urls=[{pool.servers[0].url}]", f"engine.weight_sync={sync}"))
    try:
        srv.run()
        # Synced: the server's greedy decode is the trained student's (the trainer also checked a probe
        # after every step's sync, engine.check_tolerance).
        p = srv._probe()
        sp = SamplingParams(temperature=0.0, max_new_tokens=24)
        assert srv.engine.generate([p], sp)[0].token_ids == srv.local_engine.generate([p], sp)[0].token_ids
        # in memory, the folder holds only the initial weights the servers were checked against
        assert srv.engine.weight_sync == sync
        assert sorted(d.name for d in (tmp_path / "vllm" / "sync").iterdir()) == \
            ["step-0" if sync == "collective" else "step-2"]
    finally:
        srv.close()
        restore_base(pool, base)
    a, b = comparable(tmp_path / "hf"), comparable(tmp_path / "vllm")
    assert [r["step"] for r in b] == [1, 2] and b[-1]["train/tokens"] > 0
    assert same(a, b), f"{a}\n!=\n{b}"


def test_a_killed_server_is_named_and_a_restart_resumes_exactly(vllm_server, traces, tmp_path):
    pool, base = vllm_server
    url = pool.servers[0].url
    # One request in flight: the server's batches (and so its float rounding) do not depend on timing.
    extra = ["generations=8", "checkpoint.every_steps=1", "engine.kind=vllm", "engine.max_inflight=1", "seed=3"]
    ref = Trainer(config(tmp_path / "ref", "grpo", traces, *extra, f"engine.urls=[{url}]"))
    try:
        ref.run()
    finally:
        ref.close()
        restore_base(pool, base)

    run = tmp_path / "killed"
    killed = Trainer(config(run, "grpo", traces, *extra, "engine.launch=1", f"engine.port={free_port()}",
                            "engine.startup_timeout=900"))
    server = killed.engine.servers[0]
    assert server.log == run / "servers" / "vllm-0.log" and server.process.poll() is None

    def kill_after_step_1() -> None:
        while not (run / "checkpoints" / "latest").exists():
            time.sleep(0.05)
        server.stop(grace=0)

    watcher = threading.Thread(target=kill_after_step_1, daemon=True)
    watcher.start()
    try:
        with pytest.raises(ServerUnavailableError) as err:
            killed.run()
    finally:
        killed.close()
    watcher.join(5)
    msg = str(err.value)
    assert server.url in msg and "exited with status" in msg and str(server.log) in msg
    assert server.process.poll() is not None

    resumed = Trainer(config(run, "grpo", traces, *extra, f"engine.urls=[{url}]"))
    try:
        assert resumed._resumed_from is not None and resumed.step >= 1
        resumed.run()
    finally:
        resumed.close()
        restore_base(pool, base)
    assert same(comparable(tmp_path / "ref"), comparable(run))


def test_teacher_scores_from_a_server_match_the_in_process_teacher(vllm_server, traces, tmp_path):
    """What OPSD/SDPO's loss reads of a teacher server (top-k ids and log-probs at the supervised
    positions) equals the in-process teacher's within the fp32 bound of test_vllm.fp32_tolerance."""
    import torch
    from test_vllm import fp32_tolerance

    from harness.learners.common import TokenScorer, pad_rows, served_side, teacher_side
    from lopd.config import DistillConfig
    from lopd.supervision import align_supervision

    pool, _ = vllm_server
    hf = Trainer(config(tmp_path / "hf", "opsd", traces, "generations=4", "sampling.temperature=1.0"))
    try:
        batch, _ = hf.collect(1)
        rows = [r.traj.token_ids for r in batch.rollouts]
        masks = [r.traj.loss_mask for r in batch.rollouts]
        starts = [r.prompt_len for r in batch.rollouts]
        al = align_supervision(rows, masks, rows, masks)
        dcfg = DistillConfig(full_vocab=False, top_k=20)
        ids, attn = pad_rows(rows, 0)
        with torch.no_grad():
            mine = teacher_side(TokenScorer(hf.ctx.frozen_copy()), ids, attn, al.teacher_pos, dcfg)
        served = served_side(pool.score(rows, top_k=20, start=starts), list(range(len(rows))), al.teacher_pos, "cpu")
        m = al.mask.bool()
        tol = fp32_tolerance(hf.student, float(mine.logp[m].abs().max()))
        assert m.sum() > 0 and (mine.logp[m] - served.logp[m]).abs().max() <= tol
        assert torch.equal(mine.ids[m][:, :5], served.ids[m][:, :5])
    finally:
        hf.close()


@pytest.mark.parametrize("learner", ["opsd", "grpo"])
def test_training_with_a_teacher_server(learner, vllm_server, second_server, traces, tmp_path):
    """OPSD (top-k + tail) and GRPO's reference KL score on a teacher server; it is set to the frozen
    base before training and never synced after (launching one is open_servers' launch path, tested
    with the rollout servers)."""
    pool, base = vllm_server
    teacher, _ = second_server
    t = Trainer(config(tmp_path / "run", learner, traces, "generations=8", "engine.kind=vllm", "grpo.kl_coef=0.1",
                       f"engine.urls=[{pool.servers[0].url}]", f"engine.teacher_urls=[{teacher.servers[0].url}]",
                       "opsd.distill.full_vocab=false"))
    try:
        assert t.teacher_engine.servers[0].url == teacher.servers[0].url
        t.run()
        rec = read_metrics(tmp_path / "run" / "metrics.jsonl")[-1]
        assert rec["step"] == 2 and math.isfinite(rec["train/loss"]) and rec["time/teacher"] > 0
        assert (rec["train/ref_kl"] > 0) if learner == "grpo" else (rec["train/distill_kl"] > 0)
        # the teacher still holds the frozen base: its probe agrees with the initial model's
        from harness.engines.server import check_servers

        check_servers(t.teacher_engine, HFEngine(t.ctx.frozen_copy(), t.tokenizer), t._probe(), 1e-3, "teacher")
    finally:
        t.close()
        restore_base(pool, base)
    with pytest.raises(ValueError, match="full_vocab=false"):
        Trainer(config(tmp_path / "full", "opsd", traces, "engine.kind=vllm", f"engine.urls=[{pool.servers[0].url}]",
                       f"engine.teacher_urls=[{pool.servers[0].url}]"))


def test_a_wrong_url_or_model_is_refused_before_training(second_server, traces, tmp_path):
    with pytest.raises(EngineError, match=f"127.0.0.1:{(port := free_port())}"):
        Trainer(config(tmp_path / "url", "grpo", traces, "engine.kind=vllm", f"engine.urls=[http://127.0.0.1:{port}]",
                       "engine.startup_timeout=2"))
    assert not (tmp_path / "url" / "metrics.jsonl").exists()
    # A student the server cannot hold (tiny:1m: another vocabulary) is refused at the first sync. The
    # failed reload leaves that vLLM server unusable (0.32): this test runs last on its server.
    other, _ = second_server
    cfg = config(tmp_path / "model", "grpo", traces, "engine.kind=vllm", f"engine.urls=[{other.servers[0].url}]")
    cfg.model.path = "tiny:1m"
    with pytest.raises(EngineError, match=other.servers[0].url):
        Trainer(cfg)
    assert not (tmp_path / "model" / "metrics.jsonl").exists()
