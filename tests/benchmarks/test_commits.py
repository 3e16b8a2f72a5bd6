"""benchmarks/commits.py: a session's commits are weighed from where its checkout began, and
--commit skips a checkpoint that would take them past the budget, never a result."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import benchmarks.ablation as ab
from benchmarks.commits import MIB, committed_bytes, over_budget, session_base, staged_bytes


def _git(root: Path, *a: str) -> str:
    return subprocess.run(["git", *a], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    for k in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{k}_NAME", "t"), monkeypatch.setenv(f"GIT_{k}_EMAIL", "t@t")
    origin = tmp_path / "origin"
    origin.mkdir()
    _git(origin, "init", "-q", "-b", "main")
    (origin / "old.bin").write_bytes(os.urandom(3 * MIB))  # before the session: never counted
    _git(origin, "add", "."), _git(origin, "commit", "-q", "-m", "landed")
    _git(tmp_path, "clone", "-q", str(origin), "work")
    return tmp_path / "work"


def test_the_commits_since_the_clone_weigh_each_changed_file_old_and_new(repo):
    landed = _git(repo, "rev-parse", "HEAD")
    assert session_base(repo) == landed and committed_bytes(repo, landed) == 0
    (repo / "snap.bin").write_bytes(os.urandom(MIB))
    _git(repo, "add", "."), _git(repo, "commit", "-q", "-m", "add")
    assert committed_bytes(repo, landed) == MIB
    (repo / "snap.bin").write_bytes(os.urandom(2 * MIB))
    _git(repo, "add", ".")
    assert staged_bytes(repo, ["snap.bin"]) == 3 * MIB  # the old 1 MiB out, the new 2 MiB in
    _git(repo, "commit", "-q", "-m", "change")
    _git(repo, "rm", "-q", "snap.bin"), _git(repo, "commit", "-q", "-m", "delete")
    assert committed_bytes(repo, landed) == MIB + 3 * MIB + 2 * MIB
    assert session_base(repo) == landed  # the reflog's oldest entry, whatever was committed since
    _git(repo, "checkout", "-q", "--detach")
    assert session_base(repo) == _git(repo, "rev-parse", "HEAD")  # no branch: from HEAD on


def test_over_budget_counts_the_later_removal_of_what_is_reserved(repo):
    (repo / "inflight").mkdir()
    (repo / "inflight" / "ck.bin").write_bytes(os.urandom(MIB))
    _git(repo, "add", "inflight")
    assert over_budget(repo, ["inflight"], 1.5) is None
    why = over_budget(repo, ["inflight"], 1.5, ["inflight"])  # added now, deleted when the result lands
    assert why and "would add 1.0" in why and "later 1.0" in why and "budget of 1.5 MiB" in why


def test_commit_file_skips_a_heavy_commit_past_the_budget_and_keeps_results(repo, monkeypatch, capsys):
    monkeypatch.setattr(ab, "ROOT", repo)
    monkeypatch.setattr(ab, "RESULTS", repo / "results")
    snap = repo / "results" / "inflight" / "k"
    snap.mkdir(parents=True)
    (snap / "learner.pt").write_bytes(os.urandom(MIB))
    assert ab.commit_file(snap, "snapshot 1", budget_mib=2.5, reserve=repo / "results" / "inflight")
    (snap / "learner.pt").write_bytes(os.urandom(MIB))  # 1 (done) + 2 (old out, new in) + 1 (removal) > 2.5
    assert not ab.commit_file(snap, "snapshot 2", budget_mib=2.5, reserve=repo / "results" / "inflight")
    assert "not committing results/inflight/k" in capsys.readouterr().err
    assert _git(repo, "diff", "--cached", "--name-only") == ""  # unstaged again: nothing rides on a later commit
    assert _git(repo, "log", "-1", "--format=%s") == "snapshot 1"
    result = repo / "results" / "cell" / "run-s1.json"
    result.parent.mkdir()
    result.write_text("{}\n")
    assert ab.commit_file(result, "result")  # no budget: results always go in
