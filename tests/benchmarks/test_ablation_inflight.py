"""benchmarks/ablation_inflight.py: a run's committed snapshot resumes it elsewhere, as if never stopped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import benchmarks.ablation as ab
from benchmarks.ablation_inflight import restore, snapshot, snapshot_step

sys.path.insert(0, str(Path(__file__).parents[1] / "harness" / "learners"))
from learner_fixtures import make_trainer, write_shop_expert_traces  # noqa: E402

from harness.metrics import read_metrics  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROTO = ROOT / "benchmarks" / "protocols" / "ablation.yaml"
pytestmark = pytest.mark.usefixtures("one_thread")


def _records(run: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in read_metrics(run / "metrics.jsonl")]


@pytest.mark.slow
def test_a_snapshot_restored_in_another_folder_resumes_the_run_as_if_never_stopped(tmp_path):
    """The snapshot holds the newest checkpoint and the logs cut at its offsets: what a step after it logged
    is not in it, and the run resumed from it elsewhere logs exactly what the uninterrupted run logs."""
    traces = write_shop_expert_traces(tmp_path / "expert.jsonl")
    extra = ("generations=12", "checkpoint.every_steps=1", "bank.grow=true", "seed=7")
    make_trainer(tmp_path / "ref", "lopd", traces, *extra).run()

    run = tmp_path / "here"
    tr = make_trainer(run, "lopd", traces, *extra)
    for _ in range(2):
        tr.train_step()
    tr.save_checkpoint()
    tr.train_step()  # logged after the checkpoint: a resume drops it, so the snapshot must not hold it
    dest = tmp_path / "results" / "inflight" / "key"
    assert snapshot(run, dest) == 2 and snapshot_step(dest) == 2
    assert snapshot(run, dest) is None  # nothing newer than what it holds
    assert len((dest / "metrics.jsonl").read_bytes()) < len((run / "metrics.jsonl").read_bytes())

    elsewhere = tmp_path / "another-machine" / "here"
    assert restore(dest, elsewhere)
    assert not restore(dest, elsewhere)  # its own checkpoint is as far on now
    resumed = make_trainer(elsewhere, "lopd", traces, *extra)
    assert resumed.step == 2
    resumed.run()
    ref, got = _records(tmp_path / "ref"), _records(elsewhere)
    assert [r["step"] for r in got] == [r["step"] for r in ref] == [1, 2, 3]
    for a, b in zip(ref, got):  # the same process, data order and RNG: the same numbers to the last bit
        assert a == b


def test_restore_keeps_a_folder_this_machine_trained_further(tmp_path):
    def fake_run(path: Path, step: int) -> Path:
        ck = path / "checkpoints" / f"step_{step:06d}"
        ck.mkdir(parents=True)
        (ck / "trainer.json").write_text(json.dumps({"step": step, "generations": 4 * step, "metrics_offset": 0,
                                                     "traces_offset": 0}))
        (path / "checkpoints" / "latest").write_text(ck.name + "\n")
        for name in ("metrics.jsonl", "traces.jsonl"):
            (path / name).write_text("")
        return path

    dest = tmp_path / "snap"
    snapshot(fake_run(tmp_path / "a", 5), dest)
    further = fake_run(tmp_path / "b", 10)
    assert not restore(dest, further) and (further / "checkpoints" / "step_000010").is_dir()
    link = tmp_path / "link"
    link.symlink_to(fake_run(tmp_path / "c", 1))
    assert restore(dest, link) and not link.is_symlink()
    assert (tmp_path / "c" / "checkpoints" / "step_000001").is_dir()  # what the link named is left alone


def _git(root: Path, *a: str) -> str:
    return subprocess.run(["git", *a], cwd=root, check=True, capture_output=True, text=True).stdout


def test_a_cell_commits_its_runs_in_flight_resumes_them_and_drops_them_with_the_result(tmp_path, monkeypatch):
    """commit_inflight commits a training run's snapshot; on a new machine (no runs/ folder) run_cell puts it
    back before the pipeline trains, and the result's commit deletes the snapshot it supersedes."""
    import harness.experiments.demo as demo

    _git(tmp_path, "init", "-q")
    for k in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{k}_NAME", "t"), monkeypatch.setenv(f"GIT_{k}_EMAIL", "t@t")
    _git(tmp_path, "commit", "-q", "--allow-empty", "-m", "root")
    monkeypatch.setattr(ab, "ROOT", tmp_path)
    monkeypatch.setattr(ab, "RESULTS", tmp_path / "results")
    proto = ab.load(PROTO, ["demo.jobs=1"])
    cell = proto.cells[0]
    job = ab.selected_jobs(proto, cell, ["authors-learned-s3"])[0]
    run = ab.run_dir(job)
    assert tmp_path in run.parents
    ck = run / "checkpoints" / "step_000005"
    ck.mkdir(parents=True)
    line = json.dumps({"step": 5, "generations": 160, "train/loss": 0.5, "time/step": 100.0}) + "\n"
    (run / "metrics.jsonl").write_text(line + line.replace('"step": 5', '"step": 6'))
    (run / "traces.jsonl").write_text("")
    (run / "demo_spec.json").write_text(json.dumps({"spec": {}}))
    (ck / "trainer.json").write_text(json.dumps({"step": 5, "generations": 160, "metrics_offset": len(line),
                                                 "traces_offset": 0}))
    (run / "checkpoints" / "latest").write_text(ck.name + "\n")

    assert "in flight (160 of 1600 gens, on this machine only) authors-learned-s3" in ab.plan_text(proto, [cell])
    ab.commit_inflight([job])
    snap = f"results/inflight/{job['key']}"
    assert "in flight (160 of 1600 gens, committed) authors-learned-s3" in ab.plan_text(proto, [cell])
    assert f"{snap}/checkpoints/step_000005/trainer.json" in _git(tmp_path, "ls-files")
    n = len(_git(tmp_path, "log", "--oneline").splitlines())
    ab.commit_inflight([job])
    assert len(_git(tmp_path, "log", "--oneline").splitlines()) == n  # no newer checkpoint, no commit
    (tmp_path / snap / "snapshot.json").write_text((tmp_path / snap / "snapshot.json").read_text() + " ")
    assert "in flight (160 of 1600 gens, snapshot not committed)" in ab.plan_text(proto, [cell])  # e.g. the budget
    _git(tmp_path, "checkout", "--", snap)

    import shutil
    shutil.rmtree(tmp_path / "runs")  # a fresh machine: only what is committed
    seen = []

    def pipeline(cfg, specs):
        seen.append(ab.run_dir(job).joinpath("metrics.jsonl").read_text())
        return {"runs": [{"label": specs[0].label, "seed": cfg.seeds[0], "run_dir": str(ab.run_dir(job))}]}

    monkeypatch.setattr(demo, "run_pipeline", pipeline)
    monkeypatch.setattr(ab, "test_rewards", lambda run_dir, cfg: {"t0": 1.0})
    ab.run_cell(proto, proto.cells[0], commit=True, only=["authors-learned-s3"])
    assert seen == [line]  # trained from the snapshot, cut at its checkpoint
    changes = _git(tmp_path, "show", "--name-status", "--format=", "HEAD").splitlines()
    assert f"A\tresults/{job['cell']}/authors-learned-s3.json" in changes
    assert any(c.startswith(f"D\t{snap}/") for c in changes) and snap not in _git(tmp_path, "ls-files")
    # the result records the run's speed (100 s a step of 32 generations), and the plan estimates with it
    assert json.loads(ab.result_path(job).read_text())["timing"]["seconds_per_generation"] == 100.0 * 5 / 160
    frozen = next(r for r in ab.plan_text(proto, [cell]).splitlines() if "authors-frozen-s3" in r)
    assert f"~{1600 * 100.0 * 5 / 160 / 3600:.1f} h left at the measured speed" in frozen
    ab.commit_inflight([job])  # done: nothing to snapshot, and a leftover snapshot is removed
    assert snap not in _git(tmp_path, "ls-files")
    shutil.copytree(tmp_path / "runs", tmp_path / "results" / "inflight" / job["key"])  # left by older code
    _git(tmp_path, "add", "results"), _git(tmp_path, "commit", "-q", "-m", "stale snapshot")
    ab.commit_inflight([job])
    assert snap not in _git(tmp_path, "ls-files") and not (tmp_path / snap).exists()
    (tmp_path / "stray.txt").write_text("someone's work")
    assert not ab.commit_file(tmp_path / "results" / "inflight" / job["key"], "gone already")
    assert "stray.txt" not in _git(tmp_path, "ls-files")  # a path with nothing to commit takes nothing else


def test_only_and_snapshot_need_a_cell(tmp_path):
    for argv in (["--only", "authors-learned-s3"], ["--snapshot"]):
        with pytest.raises(SystemExit):
            ab.main([*argv, "--results", str(tmp_path)])


def test_a_terminated_cell_still_makes_its_last_commit(tmp_path):
    """kill (SIGTERM) exits through Python with --commit, so the commit that ends `committing` runs."""
    import signal
    import time

    marker = tmp_path / "committed"
    code = ("import time, benchmarks.ablation as ab\n"
            "ab.exit_on_sigterm()\n"
            f"with ab.committing(999, True, lambda: open({str(marker)!r}, 'a').write('last')):\n"
            f"    open({str(tmp_path / 'started')!r}, 'w').close()\n"
            "    time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert marker.read_text() == "last"
