"""``lopd score bfcl-v3`` on result files: summary, per-entry verdicts, bad lines, missing entries."""
import json

import pytest

from envs.bfcl.data import load_entries
from envs.bfcl.replay import ground_truth_output
from envs.data import has_data
from harness.cli import main

pytestmark = pytest.mark.skipif(not has_data("bfcl_v3"), reason="BFCL-v3 data not found; set LOPD_DATA_DIR")


def _squash(text):
    return "\n".join(" ".join(line.split()) for line in text.splitlines())


def _write(folder, category, rows, extra_lines=()):
    path = folder / f"BFCL_v3_{category}_result.json"
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
        for line in extra_lines:
            f.write(line + "\n")


@pytest.mark.parametrize("fmt", ["fc", "prompt"])
def test_score_ground_truth_files(tmp_path, capsys, fmt):
    for cat in ("javascript", "multi_turn_miss_param", "live_relevance"):
        rows = [{"id": e.id, "result": ground_truth_output(e, fmt) if e.answer is not None
                 else ([{"f": "{}"}] if fmt == "fc" else "[f()]")} for e in load_entries(cat)]
        _write(tmp_path, cat, rows)
    out_file = tmp_path / "verdicts.jsonl"
    assert main(["score", "bfcl-v3", "--results", str(tmp_path), "--format", fmt, "--out", str(out_file)]) == 0
    table = _squash(capsys.readouterr().out)
    assert "JavaScript Simple AST 98.00% 49/50" in table
    assert "Multi Turn Miss Param 100.00% 200/200" in table
    assert "Live Relevance Detection 100.00% 18/18" in table
    assert "Java Simple AST N/A" in table
    # Unscored categories count as 0 with their data size: live = 18 / 2,251 (all six live files),
    # non-live = (0.98 / 3) / 5, multi-turn = 1 / 4, overall = their mean.
    assert "Live Overall Acc 0.80%" in table
    assert "Non-Live Overall Acc 6.53%" in table
    assert "Multi Turn Overall Acc 25.00%" in table
    assert "Overall Acc 10.78%" in table.splitlines()
    lines = [json.loads(x) for x in out_file.read_text().splitlines()]
    assert len(lines) == 50 + 200 + 18
    assert set(lines[0]) == {"id", "category", "valid", "error_type", "error"}
    assert [x["id"] for x in lines if not x["valid"]] == ["javascript_41"]


def test_bad_lines_and_missing_entries_are_reported_not_fatal(tmp_path, capsys):
    entries = load_entries("simple")
    rows = [{"id": e.id, "result": ground_truth_output(e, "prompt")} for e in entries[:10]]
    rows.append({"id": "simple_0", "result": "[]"})            # duplicate: the first line is kept
    rows.append({"id": "not_an_id", "result": "[]"})
    rows.append({"result": "[f()]"})                            # no id
    _write(tmp_path, "simple", rows, extra_lines=["{not json", "[1, 2]"])
    out_file = tmp_path / "v.jsonl"
    assert main(["score", "bfcl-v3", "--results", str(tmp_path), "--format", "prompt", "--out", str(out_file)]) == 0
    captured = capsys.readouterr()
    assert "Python Simple AST 2.50% 10/400" in _squash(captured.out)
    assert "not valid JSON" in captured.err and "duplicate id" in captured.err and "not in the simple data" in captured.err
    verdicts = {json.loads(x)["id"]: json.loads(x) for x in out_file.read_text().splitlines()}
    assert verdicts["simple_0"]["valid"] and verdicts["simple_399"]["error_type"] == "missing_result"


def test_missing_folder_or_files_is_a_clear_error(tmp_path, capsys):
    assert main(["score", "bfcl-v3", "--results", str(tmp_path / "nope")]) == 2
    assert main(["score", "bfcl-v3", "--results", str(tmp_path)]) == 2
    assert "no BFCL_v3_<category>_result.json files" in capsys.readouterr().err
