"""benchmarks/ablation.py: runs named by their settings, resumable from result files, the winner, the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import benchmarks.ablation as ab
from benchmarks.ablation_table import counted_results, plot_diagnostics, row_stats, table_markdown

ROOT = Path(__file__).resolve().parents[2]
PROTO = ROOT / "benchmarks" / "protocols" / "ablation.yaml"


@pytest.fixture(autouse=True)
def no_runs_of_this_machine(tmp_path, monkeypatch):
    """Jobs train under ROOT/runs: there, this machine's own ablation runs would count as in flight."""
    monkeypatch.setattr(ab, "ROOT", tmp_path)


@pytest.fixture
def proto(tmp_path, monkeypatch):
    monkeypatch.setattr(ab, "RESULTS", tmp_path)
    return ab.load(PROTO, [])


def _write(job, test, val, diag=()):
    path = ab.result_path(job)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": ab.RESULT_VERSION, "settings": job["settings"], "label": job["label"],
                                "seed": job["seed"], "composer_seed": job["composer_seed"], "test": test,
                                "val": val, "diagnostics": list(diag)}))


def test_cell_one_pairs_seeds_with_two_cold_starts_and_names_runs_by_settings(proto):
    jobs = ab.jobs_of(proto, proto.cells[0])
    learned = [j for j in jobs if j["label"] == "paper-learned"]
    assert [(j["seed"], j["composer_seed"]) for j in learned] == [(1, 0), (2, 1), (3, 0)]
    frozen = [j for j in jobs if j["label"] == "paper-frozen"]
    assert {j["key"] for j in learned}.isdisjoint(j["key"] for j in frozen)
    assert [j["key"] for j in ab.jobs_of(proto, proto.cells[0])] == [j["key"] for j in jobs]  # stable
    assert all("run_dir" not in j["settings"]["train"] for j in jobs)  # no folder in a run's name
    assert {j["cfg"].generations for j in jobs} == {1600, 3200}


def test_a_result_is_reused_unless_a_recorded_setting_changed(proto):
    job = ab.jobs_of(proto, proto.cells[0])[0]
    assert not ab.is_done(job)
    _write(job, {"t": 1.0}, {"0": {"t": 0.0}})
    assert ab.is_done(job)
    newer = {**job, "settings": {**job["settings"], "train": {**job["settings"]["train"], "new_field": 1}}}
    assert ab.is_done(newer)  # a setting added to the code since: same run
    changed = json.loads(json.dumps(job["settings"]))
    changed["train"]["optim"]["lr"] = 0.5
    assert not ab.is_done({**job, "settings": changed})


def test_the_later_cells_wait_for_cell_one_then_take_the_recipe_that_wins_on_validation(proto):
    with pytest.raises(ValueError, match="run it first"):
        ab.jobs_of(proto, proto.cells[1])
    for j in ab.jobs_of(proto, proto.cells[0]):
        if j["label"].endswith("-learned"):
            good = j["recipe"] == "authors"
            _write(j, {"t": 1.0}, {"0": {"t": 0.0}, "320": {"t": 0.9 if good else 0.4}})
    assert ab.winner(proto) == "authors"
    assert {j["recipe"] for j in ab.jobs_of(proto, proto.cells[1])} == {"authors"}


def test_later_cells_run_ahead_on_a_guess_that_counts_only_once_cell_one_confirms_it(proto, tmp_path):
    ahead = ab.load(PROTO, ["winner_guess=paper"])
    with pytest.raises(ValueError, match="no recipe"):
        ab.load(PROTO, ["winner_guess=nope"])
    guessed = [j for j in ab.jobs_of(ahead, ahead.cells[1]) if j["label"] == "m0"]
    assert {j["recipe"] for j in guessed} == {"paper"}
    assert "[ahead of the choice, on winner_guess=paper" in ab.plan_text(ahead, [ahead.cells[1]])
    for j in guessed:
        _write(j, {"t": 1.0}, {"0": {"t": 0.0}})
        assert ab.is_done(j)
    md = table_markdown(ahead, tmp_path, None)
    assert "Not reported yet: the first cell has not chosen its recipe; 3 of its runs" in md
    assert counted_results(ahead.cells[1], tmp_path, None) is None  # so --table plots none of it either
    for j in ab.jobs_of(proto, proto.cells[0]):  # then the authors' recipe wins cell 1 on validation
        if j["label"].endswith("-learned"):
            _write(j, {"t": 0.5}, {"0": {"t": 0.0}, "320": {"t": 0.9 if j["recipe"] == "authors" else 0.1}})
    assert ab.winner(ahead) == "authors" and "ahead of the choice" not in ab.plan_text(ahead, [ahead.cells[1]])
    m0 = [j for j in ab.jobs_of(ahead, ahead.cells[1]) if j["label"] == "m0"]
    assert not any(ab.is_done(j) for j in m0)  # the guess's runs are not the winner's: trained anew
    assert "| m0 | 0 of 3 runs done |" in table_markdown(ahead, tmp_path, "authors")


def test_the_table_reports_each_rows_mean_and_interval_and_says_what_is_missing(proto, tmp_path):
    jobs = [j for j in ab.jobs_of(proto, proto.cells[0]) if j["label"] == "paper-frozen"]
    tests = [{"a": 1.0, "b": 0.0}, {"a": 1.0, "b": 1.0}, {"a": 0.0, "b": 0.0}]
    for j, t in zip(jobs, tests):
        _write(j, t, {"0": {"a": 0.0}, "320": {"a": 0.5}},
               [{"step": 1, "composer/beta": 0.0}, {"step": 2, "composer/beta": 0.025}])
    s = row_stats([json.loads(ab.result_path(j).read_text()) for j in jobs])
    assert s["mean"] == pytest.approx(0.5) and s["lo"] <= 0.5 <= s["hi"] and s["cold_starts"] == [0, 1]
    md = table_markdown(proto, tmp_path)
    assert "| paper-frozen | 0.500 [" in md and "| paper-learned | 0 of 3 runs done |" in md and "0.573" in md
    learned = [j for j in ab.jobs_of(proto, proto.cells[0]) if j["label"] == "paper-learned"]
    for j, t in zip([learned[2], learned[0]], tests):
        _write(j, t, {"0": {"a": 0.0}, "320": {"a": 0.25}})
    md = table_markdown(proto, tmp_path)
    assert "| paper-learned | 2 of 3 runs done | s1: 1.000, s3: 0.500 |" in md  # the seeds done so far
    # where the learned composer falls behind, in numbers: validation by generations, the diagnostics by step
    assert "paper-learned against paper-frozen, seeds [1, 3]" in md
    assert "| learned | 0.000 | 0.250 |" in md and "| frozen | 0.000 | 0.500 |" in md
    assert "| learned - frozen | 0.000 | -0.250 |" in md
    png = plot_diagnostics(tmp_path / "learned_vs_frozen", tmp_path / "d.png")
    assert png is not None and png.stat().st_size > 10_000


def test_a_run_another_cell_already_trained_is_reused_with_its_provenance(proto, tmp_path):
    """The margin cell's m = 0.05 row is cell 1's learned row of the winning recipe: not trained twice."""
    first = ab.jobs_of(proto, proto.cells[0])
    for j in first:
        if j["label"].endswith("-learned"):
            _write(j, {"t": 0.5}, {"0": {"t": 0.0}, "320": {"t": 0.9 if j["recipe"] == "paper" else 0.1}})
    margin = [j for j in ab.jobs_of(proto, proto.cells[1]) if j["label"] == "m0.05"]
    m0 = [j for j in ab.jobs_of(proto, proto.cells[1]) if j["label"] == "m0"]
    plan = ab.plan_text(proto, [proto.cells[1]])
    assert "shared (learned_vs_frozen/paper-learned-s1) m0.05-s1" in plan and "todo m0-s1" in plan
    assert "9 runs, 3 done or shared, 6 to train (9,600 generations left" in plan
    assert all(ab.reuse(j, commit=False) for j in margin) and not any(ab.reuse(j, commit=False) for j in m0)
    got = json.loads(ab.result_path(margin[0]).read_text())
    assert got["label"] == "m0.05" and got["reused_from"] == "learned_vs_frozen/paper-learned-s1.json"
    assert all(ab.is_done(j) for j in margin)


def test_two_rows_of_one_run_in_a_cell_are_planned_and_trained_once(tmp_path, monkeypatch):
    """latents32 and retrieve3 are both the recipe's defaults: on seed 2 (cold start 0) they are one run."""
    import harness.experiments.demo as demo

    monkeypatch.setattr(ab, "RESULTS", tmp_path)
    proto = ab.load(PROTO, ["demo.jobs=1", "winner_guess=paper"])
    cell = proto.cells[2]
    assert "shared (latents32-s2, planned above) retrieve3-s2" in ab.plan_text(proto, [cell])
    trained = []
    monkeypatch.setattr(demo, "run_pipeline", lambda cfg, specs: trained.append(specs[0].label)
                        or {"runs": [{"label": specs[0].label, "seed": cfg.seeds[0]}]})
    monkeypatch.setattr(ab, "write_result", lambda j, run, commit: _write(j, {"t": 1.0}, {"0": {"t": 0.0}}))
    ab.run_cell(proto, cell, commit=False, only=["latents32-s2", "retrieve3-s2"])
    assert trained == ["latents32-cs0"]
    got = json.loads((tmp_path / cell.name / "retrieve3-s2.json").read_text())
    assert got["reused_from"] == f"{cell.name}/latents32-s2.json"


def test_the_table_pairs_learned_with_frozen_seed_by_seed(proto, tmp_path):
    for j in ab.jobs_of(proto, proto.cells[0]):
        if j["recipe"] == "paper" and j["label"] in ("paper-learned", "paper-frozen"):
            hit = 1.0 if j["label"] == "paper-frozen" else 0.0
            _write(j, {"a": hit, "b": hit}, {"0": {"a": 0.0}, "320": {"a": 0.5}})
    md = table_markdown(proto, tmp_path)
    assert "paper: learned minus frozen -1.000 [-1.000, -1.000] (p = 0.00; seeds [1, 2, 3]" in md
    assert "| learned - frozen | 0.000 | 0.000 |" in md  # validation by generations: 0 and 320
    assert "paper-learned: per-step diagnostics" not in md  # these results record none
    assert "authors: learned minus frozen" not in md  # no complete pair of rows


def test_the_cold_start_checkpoints_are_committed_while_a_cell_runs_and_at_its_end(tmp_path, monkeypatch):
    import subprocess
    import time

    def git(*a):
        return subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "root")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "t"), monkeypatch.setenv("GIT_AUTHOR_EMAIL", "t@t")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "t"), monkeypatch.setenv("GIT_COMMITTER_EMAIL", "t@t")
    monkeypatch.setattr(ab, "ROOT", tmp_path)
    folder = tmp_path / "coldstarts"
    (tmp_path / "other.txt").write_text("not committed")
    with ab.committing(0.05, True, lambda: ab.commit_checkpoints(folder)):
        folder.mkdir()
        (folder / "coldstart-a.pt").write_bytes(b"step 50")
        deadline = time.monotonic() + 30
        while "coldstart-a.pt" not in git("ls-files") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "coldstart-a.pt" in git("ls-files")  # committed while the body still runs
        (folder / "coldstart-a.pt").write_bytes(b"step 100")
        time.sleep(0.2)
        (folder / "coldstart-a.pt").write_bytes(b"step 150")
    assert git("show", "HEAD:coldstarts/coldstart-a.pt") == "step 150"  # the end's state, committed
    assert "other.txt" not in git("ls-files")  # nothing but the checkpoints
    n = len(git("log", "--oneline").splitlines())
    with ab.committing(0.05, True, lambda: ab.commit_checkpoints(folder)):
        time.sleep(0.2)
    assert len(git("log", "--oneline").splitlines()) == n  # no change, no commit


def test_a_commit_waits_out_a_git_lock_and_leaves_what_others_staged(tmp_path, monkeypatch):
    import subprocess

    def git(*a):
        return subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    for k in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{k}_NAME", "t"), monkeypatch.setenv(f"GIT_{k}_EMAIL", "t@t")
    git("commit", "-q", "--allow-empty", "-m", "root")
    monkeypatch.setattr(ab, "ROOT", tmp_path)
    monkeypatch.setattr(ab.time, "sleep", lambda s: lock.unlink(missing_ok=True))  # the other user finishes
    (tmp_path / "mine.txt").write_text("staged by the person working here")
    git("add", "mine.txt")
    (tmp_path / "result.json").write_text("{}")
    lock = tmp_path / ".git" / "index.lock"
    lock.write_text("")  # someone else's git command holds the index
    assert ab.commit_file(tmp_path / "result.json", "result")
    assert git("show", "--name-only", "--format=", "HEAD").split() == ["result.json"]
    assert "mine.txt" in git("diff", "--cached", "--name-only")  # still staged, not committed


def test_a_commit_that_cannot_be_made_is_reported_not_raised(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ab, "ROOT", tmp_path)  # not a git repository
    (tmp_path / "result.json").write_text("{}")
    assert not ab.commit_file(tmp_path / "result.json", "result")
    assert "could not commit result.json" in capsys.readouterr().err


@pytest.mark.parametrize("jobs", [1, 2])
def test_with_one_job_at_a_time_each_result_is_written_as_its_run_ends(tmp_path, monkeypatch, jobs):
    """demo.jobs=1: one pipeline call per run, so a kill loses at most the run in training, never a finished
    one whose batch-mates were still running; 2 jobs: the runs of a seed train together."""
    import harness.experiments.demo as demo

    proto = ab.load(PROTO, [f"demo.jobs={jobs}"])
    monkeypatch.setattr(ab, "RESULTS", tmp_path)
    events = []

    def pipeline(cfg, specs):
        events.append(("train", tuple(s.label for s in specs), tuple(cfg.seeds)))
        return {"runs": [{"label": s.label, "seed": seed} for s in specs for seed in cfg.seeds]}

    monkeypatch.setattr(demo, "run_pipeline", pipeline)
    monkeypatch.setattr(ab, "write_result", lambda j, run, commit: events.append(("write", j["label"], j["seed"])))
    cell = proto.cells[0]
    ab.run_cell(proto, cell, commit=False)
    trains = [e for e in events if e[0] == "train"]
    n_jobs = len(ab.jobs_of(proto, cell))
    assert sum(e[0] == "write" for e in events) == n_jobs
    if jobs == 1:
        assert len(trains) == n_jobs and all(len(e[1]) == len(e[2]) == 1 for e in trains)
        assert all(a[0] == "train" and b[0] == "write" for a, b in zip(events[::2], events[1::2]))
    else:
        assert len(trains) < n_jobs and any(len(e[1]) > 1 for e in trains)


def test_only_trains_the_named_runs_and_rejects_a_name_the_cell_lacks(tmp_path, monkeypatch):
    """--only splits a cell between processes: the runs whose cold start exists go on beside one that trains
    a new cold start, and a mistyped name is an error, not a silently empty run."""
    import harness.experiments.demo as demo

    proto = ab.load(PROTO, ["demo.jobs=1"])
    monkeypatch.setattr(ab, "RESULTS", tmp_path)
    trained = []
    monkeypatch.setattr(demo, "run_pipeline", lambda cfg, specs: trained.append((specs[0].label, cfg.seeds[0]))
                        or {"runs": [{"label": specs[0].label, "seed": cfg.seeds[0]}]})
    monkeypatch.setattr(ab, "write_result", lambda j, run, commit: None)
    cell = proto.cells[0]
    ab.run_cell(proto, cell, commit=False, only=["authors-learned-s3", "paper-frozen-s2"])
    assert sorted(trained) == [("authors-learned-cs0", 3), ("paper-frozen-cs1", 2)]
    trained.clear()  # a run another process finished while this one trained is not trained again
    pair = {ab.run_name(j): j for j in ab.jobs_of(proto, cell) if ab.run_name(j) in ("authors-learned-s3",
                                                                                        "paper-frozen-s2")}

    def finishing_the_other(cfg, specs):  # the other run of the pair lands while this one trains
        trained.append((specs[0].label, cfg.seeds[0]))
        other = next(j for j in pair.values() if j["spec"].label != specs[0].label)
        _write(other, {"t": 1.0}, {"0": {"t": 0.0}})
        return {"runs": [{"label": specs[0].label, "seed": cfg.seeds[0]}]}

    monkeypatch.setattr(demo, "run_pipeline", finishing_the_other)
    ab.run_cell(proto, cell, commit=False, only=list(pair))
    assert len(trained) == 1
    with pytest.raises(ValueError, match="no run.*authors-learned-s9"):
        ab.run_cell(proto, cell, commit=False, only=["authors-learned-s9"])
    with pytest.raises(SystemExit):
        ab.main(["--cell", cell.name, "--only", "nope-s1", "--results", str(tmp_path), "--protocol", str(PROTO)])
