"""Envs from outside the repo: a package's env named ``module:env-id`` (imported first, as gymnasium.make
does) or declared in the ``lopd_gym.envs`` entry-point group is trained and evaluated by id."""

import json
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "harness" / "learners"))
from learner_fixtures import small_overrides  # noqa: E402

from envs.trace import read_traces  # noqa: E402
from harness.cli import main  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

TODO_ENV = (Path(__file__).resolve().parents[1] / "data" / "todo_env.py").read_text()


def _package(root: Path, name: str, registration: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(TODO_ENV)
    (root / name / "registration.py").write_text(registration)


def _train_then_eval(tmp_path: Path, train_id: str, eval_id: str, registered: str) -> None:
    run = tmp_path / "run"
    assert main(["train", *small_overrides(run, "grpo", None, f"env.id={train_id}", "generations=4")]) == 0
    train = [e for e in read_traces(run / "traces.jsonl") if e.meta["phase"] == "train"]
    assert {(e.env_id, e.task_id) for e in train} == {(registered, "milk")}
    student = run / "checkpoints" / "step_000001" / "student"
    out = tmp_path / "eval"
    assert main(["eval", "--env", eval_id, "--model", str(student), "--out", str(out), "--max-new-tokens", "8",
                 "--max-turns", "2", "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["envs"][registered]["episodes"] == 2  # both tasks, by the id the package registered


def test_a_module_colon_id_env_is_imported_then_trained_and_evaluated(tmp_path, monkeypatch):
    pkgs = tmp_path / "site"
    _package(pkgs, "todo_colon_pkg", "")
    with open(pkgs / "todo_colon_pkg" / "__init__.py", "a") as f:
        f.write('\nfrom envs import register_env\n\nregister_env("lopd/todo-colon-v0", "todo_colon_pkg:TodoEnv")\n')
    monkeypatch.syspath_prepend(str(pkgs))
    _train_then_eval(tmp_path, "todo_colon_pkg:lopd/todo-colon-v0", "todo_colon_pkg:lopd/todo-colon-v0",
                     "lopd/todo-colon-v0")
    assert "todo_colon_pkg:" in (tmp_path / "run" / "config.yaml").read_text()  # a resume imports it again


def test_an_entry_point_env_of_an_installed_package_is_trained_and_evaluated(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _package(site, "todo_ep_pkg", textwrap.dedent('''
        from envs import register_env

        register_env("lopd/todo-ep-v0", "todo_ep_pkg:TodoEnv")
    '''))
    dist = site / "todo_ep_pkg-0.1.dist-info"  # what pip install leaves
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: todo-ep-pkg\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[lopd_gym.envs]\ntodo = todo_ep_pkg.registration\n")
    monkeypatch.syspath_prepend(str(site))
    _train_then_eval(tmp_path, "lopd/todo-ep-v0", "todo-ep-v0", "lopd/todo-ep-v0")


def test_a_module_that_is_not_there_is_named(tmp_path, capsys):
    rc = main(["eval", "--env", "no_such_pkg_xyz:lopd/x-v0", "--model", "tiny:1m", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 2 and "no module 'no_such_pkg_xyz'" in err and "Traceback" not in err
