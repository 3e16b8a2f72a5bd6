"""``lopd eval`` output folders: a start that ran no episode does not lock the folder, one that ran episodes
refuses other settings by name, and ``--quiet`` hides progress but not the repairs of a resumed folder."""

import json
from pathlib import Path

import pytest

from harness.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")


def _eval(model, out, *extra):
    return ["eval", "--env", "shop-v0", "--model", model, "--out", str(out), "--max-new-tokens", "8",
            "--max-turns", "2", "--temperature", "1.0", *extra]


def test_a_failed_start_does_not_lock_the_folder_but_played_episodes_do(model_dir, tmp_path, capsys):
    out = tmp_path / "eval"
    try:  # a model folder that is not there fails before any episode ran
        rc = main(_eval(str(tmp_path / "no-such-model"), out, "--quiet"))
    except Exception:  # noqa: BLE001 - how it fails is the CLI boundary's business, not this test's
        rc = None
    assert rc != 0
    assert main(_eval(model_dir, out, "--quiet")) == 0  # the corrected rerun into the same --out works
    assert json.loads((out / "run.json").read_text())["model"] == str(Path(model_dir).resolve())
    capsys.readouterr()
    assert main(_eval(model_dir, out, "--quiet", "--temperature", "0.3")) == 2  # episodes ran: refused
    err = capsys.readouterr().err
    assert "temperature: 1.0 -> 0.3" in err and "Traceback" not in err


def test_quiet_hides_progress_but_not_the_repairs_of_a_resumed_folder(model_dir, tmp_path, capsys):
    out = tmp_path / "eval"
    assert main(_eval(model_dir, out, "--quiet")) == 0
    assert "episodes planned" not in capsys.readouterr().err
    with open(out / "traces.jsonl", "a") as f:
        f.write('{"not": "an episode"\n')  # a corrupt line, as a crashed writer or an editor leaves
    assert main(_eval(model_dir, out, "--quiet")) == 0
    err = capsys.readouterr().err
    assert "traces.jsonl:3" in err and "episodes planned" not in err and "episodes done" not in err
