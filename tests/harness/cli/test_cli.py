import subprocess
import sys

import pytest

from harness.cli import main


def test_help_lists_commands(capsys):
    assert main([]) == 2
    out = capsys.readouterr().out
    assert "demo" in out and "score" in out


@pytest.mark.parametrize("module", ["harness", "harness.cli"])
def test_console_script_entry_point_runs(module):
    r = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "COMMAND" in r.stdout
