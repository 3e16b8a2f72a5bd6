"""``lopd score evalplus``: sample formats, several samples per task, verdict lines, pass@1."""

import json

import pytest

from envs.data import has_data
from harness.cli import main

pytestmark = pytest.mark.skipif(not has_data("evalplus"), reason="EvalPlus data not found; set LOPD_DATA_DIR")


def test_score_humaneval_samples(tmp_path, capsys, read_verdicts):
    from envs.evalplus.data import load_problems

    p = load_problems("humaneval")
    samples = [
        {"task_id": "HumanEval/53", "completion": p["HumanEval/53"]["canonical_solution"]},
        {
            "task_id": "HumanEval/55",
            "solution": p["HumanEval/55"]["prompt"] + p["HumanEval/55"]["canonical_solution"],
        },
        {"task_id": "HumanEval/53", "solution": "def add(x, y):\n    return x - y\n"},
        {
            "task_id": "HumanEval/53",
            "solution": "class T:\n    def __eq__(s, o):\n        return True\n"
            "def add(x, y):\n    return T()\n",
        },
        {"task_id": "NotATask/1", "solution": "pass"},
    ]
    path, out = tmp_path / "samples.jsonl", tmp_path / "verdicts.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    assert (
        main(["score", "evalplus", "--dataset", "humaneval", "--samples", str(path), "--out", str(out)]) == 0
    )
    text = capsys.readouterr().out
    # HumanEval/53: 2 of 3 pass (the fake passes in official mode), HumanEval/55: 1 of 1 -> (2/3 + 1) / 2
    assert (
        "humaneval (base tests)\npass@1:\t0.833" in text
        and "humaneval+ (base + extra tests)\npass@1:\t0.833" in text
    )
    lines, rows = read_verdicts(out, "task_id")
    assert rows == [
        ("HumanEval/53", 0, True),
        ("HumanEval/55", 0, True),
        ("HumanEval/53", 1, False),
        ("HumanEval/53", 2, True),
        ("NotATask/1", 0, False),
    ]
    assert lines[2]["base_status"] == "fail" and "error" in lines[4]
    assert (
        main(["score", "evalplus", "--dataset", "humaneval", "--samples", str(path), "--mode", "strict"]) == 0
    )
    assert "pass@1:\t0.667" in capsys.readouterr().out  # strict: the fake fails -> (1/3 + 1) / 2


def test_bad_samples_file_is_a_clear_error(tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"task_id": "HumanEval/0"}\n')
    assert main(["score", "evalplus", "--dataset", "humaneval", "--samples", str(path)]) == 2
    assert "solution" in capsys.readouterr().err
