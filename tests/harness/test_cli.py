import subprocess
import sys

from envs.trace import read_traces
from harness.cli import main


def test_help_lists_commands(capsys):
    assert main([]) == 2
    out = capsys.readouterr().out
    assert "demo" in out and "score" in out


def test_console_script_entry_point_runs():
    r = subprocess.run([sys.executable, "-m", "harness", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "COMMAND" in r.stdout


def test_demo_writes_traces_that_read_back(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--episodes", "3"]) == 0
    eps = list(read_traces(tmp_path / "traces.jsonl"))
    assert len(eps) == 6
    expert = [e for e in eps if e.meta["policy"] == "expert"]
    assert all(e.reward == 1.0 for e in expert)
    assert "expert" in capsys.readouterr().out
