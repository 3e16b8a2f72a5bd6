"""``lopd score livecodebench``: code_list samples, verdict lines in order, pass@1, public-only warning."""

import json

import pytest
from lcb_records import SUM_OK, TWO_SUM_OK

from envs.data import has_data, require_data
from harness.cli import main


def test_score_own_records(own_file, tmp_path, capsys, read_verdicts):
    samples = [
        {"question_id": "own_sum", "code_list": [SUM_OK, "print(0)"]},
        {"question_id": "own_twosum", "code_list": [TWO_SUM_OK]},
        {"question_id": "missing", "code_list": ["print(1)"]},
    ]
    path, out = tmp_path / "gen.json", tmp_path / "verdicts.jsonl"
    path.write_text(json.dumps(samples))
    assert (
        main(
            ["score", "livecodebench", "--problems", str(own_file), "--samples", str(path), "--out", str(out)]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "pass@1: 0.7500" in text and "NOT a LiveCodeBench score" not in text  # (1/2 + 1) / 2
    lines, rows = read_verdicts(out, "question_id")
    assert rows == [
        ("own_sum", 0, True),
        ("own_sum", 1, False),
        ("own_twosum", 0, True),
        ("missing", 0, False),
    ]
    assert lines[0]["results"] == [True, True, True] and lines[1]["results"] == [-2]


@pytest.mark.skipif(not has_data("livecodebench"), reason="LiveCodeBench data not found; set LOPD_DATA_DIR")
def test_staged_file_scores_carry_the_warning(tmp_path, capsys):
    path = tmp_path / "gen.jsonl"
    path.write_text(json.dumps({"question_id": "1873_A", "code_list": ["print('YES')"]}) + "\n")
    problems = require_data("livecodebench", "lcb_codegen_lite_release_v6_public_tests.jsonl")
    assert main(["score", "livecodebench", "--problems", str(problems), "--samples", str(path)]) == 0
    text = capsys.readouterr().out
    assert "pass@1: 0.0000" in text and "NOT a LiveCodeBench score" in text


def test_bad_samples_are_a_clear_error(own_file, tmp_path, capsys):
    path = tmp_path / "gen.json"
    path.write_text(json.dumps([{"question_id": "own_sum", "code_list": "print(1)"}]))
    assert main(["score", "livecodebench", "--problems", str(own_file), "--samples", str(path)]) == 2
    assert "code_list" in capsys.readouterr().err
