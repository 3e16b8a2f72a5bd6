"""``lopd serve-mcp``'s mistakes: exit 2, one ``lopd serve-mcp: error:`` line naming the culprit on stderr,
nothing on stdout, and all of it before anything is served (serving here fails the test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

from envs import Task, ToolEnv, ToolSet
from harness.cli import main

ROOT = Path(__file__).resolve().parents[3]
SHOP = "lopd/shop-v0"
NO_TOOLS = "lopd/test-serve-mcp-no-tools-v0"


class _NoToolsEnv(ToolEnv):
    """Scores responses and runs no calls (as BFCL's envs do): nothing to serve."""

    def load_tasks(self):
        return [Task("t", "Say hi.")]

    def setup(self, task):
        return ToolSet()

    def verify(self, task, state):
        return 0.0


if NO_TOOLS not in gym.registry:
    gym.register(id=NO_TOOLS, entry_point=_NoToolsEnv)


@pytest.fixture(autouse=True)
def _never_serve(monkeypatch):
    import mcp.server.stdio

    def refuse(*args, **kwargs):
        raise AssertionError("served despite the mistake")

    monkeypatch.setattr(mcp.server.stdio, "stdio_server", refuse)


CASES = [
    (["lopd/nope-v0"], "unknown env 'lopd/nope-v0'; registered: lopd/"),
    (["nopkg_for_serve_mcp:lopd/todo-v0"], "no module 'nopkg_for_serve_mcp' to import"),
    ([SHOP, "--task-id", "nope"], "lopd/shop-v0 has no task 'nope'; its tasks: apples, mix"),
    ([SHOP, "bogus=1"], "lopd/shop-v0 takes no keyword argument 'bogus'; it takes: call_policy, max_steps"),
    ([SHOP, "--task-id", "apples", "max_steps=0"], "max_steps must be >= 1"),  # KEY=VALUE after a flag
    ([SHOP, "max_steps=many"], "lopd/shop-v0 refuses its keyword arguments {'max_steps': 'many'}: '<' not"),
    ([SHOP, "apples"], "'apples' is no KEY=VALUE env keyword argument"),
    ([SHOP, "=1"], "has an empty key"),
    ([SHOP, "--split", "nope"], "ShopEnv has no tasks in split 'nope'"),
    ([SHOP, "--split", "eval", "split=train"], "--split eval and split=train disagree"),
    ([NO_TOOLS], f"{NO_TOOLS} task 't' has no callable tools"),
]


@pytest.mark.parametrize(("argv", "message"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_a_mistake_exits_2_with_its_message(argv, message, capsys):
    assert main(["serve-mcp", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("lopd serve-mcp: error: ") and message in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(("argv", "message"), [
    ([SHOP, "--task-id", "apples", "--seed", "1"], "argument --seed: not allowed with argument --task-id"),
    ([SHOP, "--seed", "one"], "argument --seed: invalid int value: 'one'"),
    ([], "the following arguments are required: ENV_ID"),
])
def test_a_bad_flag_is_argparses_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(["serve-mcp", *argv])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_the_command_says_so_before_serving_in_a_real_process():
    p = subprocess.run([sys.executable, "-m", "harness.cli", "serve-mcp", SHOP, "--task-id", "nope"], cwd=ROOT,
                       stdin=subprocess.PIPE, capture_output=True, text=True, timeout=60)  # stdin left open
    assert p.returncode == 2
    assert p.stdout == ""
    assert p.stderr == "lopd serve-mcp: error: lopd/shop-v0 has no task 'nope'; its tasks: apples, mix\n"
