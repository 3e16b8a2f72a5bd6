"""benchmarks/bench_sandbox_change.py at a tiny size: HEAD against the working tree, local backend only."""

import json

import pytest

from benchmarks import bench_sandbox_change
from envs.data import has_data


def test_help_parses(capsys):
    with pytest.raises(SystemExit) as e:
        bench_sandbox_change.main(["--help"])
    assert e.value.code == 0 and "--old" in capsys.readouterr().out


@pytest.mark.slow  # a worktree, a snapshot of this one and four child processes, each with a sandbox
@pytest.mark.skipif(not has_data("evalplus"), reason="EvalPlus data not found; set LOPD_DATA_DIR")
def test_head_against_working_tree(tmp_path, capsys):
    out = tmp_path / "bench.json"
    rc = bench_sandbox_change.main(["--old", "HEAD", "--repeats", "1", "--backends", "local", "--limit", "3",
                                    "--runs", "3", "--out", str(out)])
    printed = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert rc == 0, (printed, doc["failed_measurements"])
    (s,) = doc["summary"]
    assert s["backend"] == "local" and s["verdict_diffs"] == []
    assert s["old_median_vps"] > 0 and s["new_median_vps"] > 0 and len(s["per_repeat_ratios"]) == 1
    assert set(s["overhead_median_ms"]) == {"print(1)", "preloaded: import numpy, evalplus.eval"}
    for side in ("old", "new"):
        tree = doc["revisions"][side]["path"]
        (ev,) = doc["results"]["local"][side]["evalplus"]
        (ov,) = doc["results"]["local"][side]["overhead"]
        assert ev["envs_file"].startswith(tree) and ov["envs_file"].startswith(tree)  # that tree's code ran
        assert len(ev["verdicts"]) == 3 and all(p for _, p in ev["verdicts"]) and not ev["cache_cold_tasks"]
        assert all(v["runs"] == 3 for v in ov["cases"].values())
    assert "| local |" in printed and "identical (task_id, passed)" in printed
    assert "bench-sandbox-change-" not in bench_sandbox_change.git("worktree", "list")  # removed
