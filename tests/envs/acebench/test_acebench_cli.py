"""``lopd score acebench`` on result files: the table, --out, and bad inputs."""

import json

import pytest
from conftest import needs_data

from envs.acebench.data import ALL_CATEGORIES, load_category
from envs.acebench.ground_truth import (
    EXCEPTIONS_FILE,
    milestone_lists,
    normal_output,
    replay_agent,
    special_output,
)
from harness.cli import main

pytestmark = needs_data


def ground_truth_row(entry):
    if entry.family == "normal":
        gt = entry.ground_truth[0] if isinstance(entry.ground_truth, list) else entry.ground_truth
        return {"id": entry.id, "result": normal_output(gt)}
    if entry.family == "special":
        return {"id": entry.id, "result": special_output(entry.category, entry.ground_truth)}
    saved, process = replay_agent(entry, milestone_lists(entry)[0])
    return {"id": entry.id, "result": saved, "process": process}


@pytest.fixture(scope="module")
def gt_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("acebench_en")
    for category in ALL_CATEGORIES:
        rows = [ground_truth_row(e) for e in load_category("en", category)]
        (root / f"data_{category}_result.json").write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
        )
    return root


def test_scores_ground_truth_results(gt_results, tmp_path, capsys):
    out = tmp_path / "verdicts.jsonl"
    assert (
        main(["score", "acebench", "--results", str(gt_results), "--language", "en", "--out", str(out)]) == 0
    )
    table = capsys.readouterr().out
    assert "special_irrelevant" in table and "summary (ACEBench table)" in table and "missing" not in table
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 1023
    assert all(set(r) == {"id", "category", "valid", "error_type", "error"} for r in rows)
    exceptions = json.loads(EXCEPTIONS_FILE.read_text(encoding="utf-8"))
    expected_invalid = set(exceptions["normal"]["en"]) | {
        k for k, v in exceptions["agent"]["en"].items() if "#" not in k and not v["official_valid"]
    }
    assert {r["id"] for r in rows if not r["valid"]} == expected_invalid


def _summary_line(table, key):
    """The table's last line starting with ``key``, spaces squashed (the last "summary" is the score)."""
    return [" ".join(line.split()) for line in table.splitlines() if line.split()[:1] == [key]][-1]


def test_zh_results(tmp_path, capsys):
    irrelevant = [
        ("special_irrelevant_0", "由于函数的限制，Due to the limitations of the function, I cannot solve it."),
        ("special_irrelevant_1", "由于函数的限制，我无法解决这个问题。"),  # no English phrase: fails, as upstream
        ("special_irrelevant_2", "the limitations of the function"),
    ]
    (tmp_path / "data_special_irrelevant_result.json").write_text(
        "".join(json.dumps({"id": i, "result": r}, ensure_ascii=False) + "\n" for i, r in irrelevant),
        encoding="utf-8",
    )
    # zh's special_error_param_0 answer is {'time_range': ['10点到16点']} (en's is a different entry)
    error_param = "There is incorrect value (10点到16点) for the parameters (time_range)."
    (tmp_path / "data_special_error_param_result.json").write_text(
        json.dumps({"id": "special_error_param_0", "result": error_param}, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "zh.jsonl"
    assert main(["score", "acebench", "--results", str(tmp_path), "--language", "zh", "--out", str(out)]) == 0
    table = capsys.readouterr().out
    rows = {r["id"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    assert len(rows) == 50 + 50
    assert [rows[i]["valid"] for i, _ in irrelevant] == [True, False, True]
    assert rows["special_irrelevant_1"]["error_type"] == "error_detection"
    assert rows["special_irrelevant_3"]["error_type"] == "missing_result"
    assert rows["special_error_param_0"]["valid"] is True
    assert _summary_line(table, "special_irrelevant") == "special_irrelevant 0.040 2/50"
    assert _summary_line(table, "special_summary") == "special_summary 0.020"  # (0 + 1/50 + 2/50) / 3
    assert _summary_line(table, "summary") == "summary 0.005"  # round(0.2676 * 0.02, 3)
    # the same files scored as en: error_param_0 is another entry there, so it fails
    assert main(["score", "acebench", "--results", str(tmp_path), "--language", "en", "--out", str(out)]) == 0
    assert _summary_line(capsys.readouterr().out, "summary") == "summary 0.003"  # round(0.2676 * 0.04 / 3, 3)
    assert json.loads(out.read_text(encoding="utf-8").splitlines()[0])["error_type"] == "error_correction"


def test_bad_and_partial_inputs_never_crash(gt_results, tmp_path, capsys):
    assert main(["score", "acebench", "--results", str(tmp_path / "nope")]) == 2
    assert main(["score", "acebench", "--results", str(tmp_path)]) == 2  # no result files
    messy = tmp_path / "messy"
    messy.mkdir()
    lines = [
        "not json",
        json.dumps([1, 2]),
        json.dumps({"id": "special_irrelevant_0", "result": None}),
        json.dumps({"id": "special_irrelevant_1", "result": "the limitations of the function"}),
        json.dumps({"id": "special_irrelevant_1", "result": "duplicate"}),
        json.dumps({"id": "special_irrelevant_2"}),
        json.dumps({"id": "nobody", "result": "x"}),
        "",
    ]
    (messy / "data_special_irrelevant_result.json").write_text("\n".join(lines), encoding="utf-8")
    (messy / "data_normal_atom_bool_result.json").write_text(
        json.dumps({"id": "normal_atom_bool_0", "result": {"not": "text"}})
        + "\n"
        + json.dumps({"id": "normal_atom_bool_1", "result": "[" * 500})
        + "\n",
        encoding="utf-8",
    )
    (messy / "data_agent_multi_turn_result.json").write_text(
        json.dumps({"id": "agent_multi_turn_0", "result": "nonsense", "process": 5}) + "\n", encoding="utf-8"
    )
    out = tmp_path / "messy.jsonl"
    assert main(["score", "acebench", "--results", str(messy), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "not valid JSON" in captured.err and "duplicate id" in captured.err and "nobody" in captured.err
    assert "missing" in captured.out
    rows = {r["id"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    assert len(rows) == 50 + 50 + 30
    assert rows["special_irrelevant_1"]["valid"] is True
    assert rows["special_irrelevant_0"]["error_type"] == "checker_error"
    assert rows["special_irrelevant_2"]["error_type"] == "wrong_output_format"
    assert rows["special_irrelevant_3"]["error_type"] == "missing_result"
    assert rows["normal_atom_bool_0"]["error_type"] == "wrong_output_format"
    assert rows["normal_atom_bool_1"]["error_type"] == "wrong_output_format"
    assert rows["agent_multi_turn_0"]["valid"] is False


def test_fc_results(tmp_path, capsys):
    entry = load_category("en", "normal_atom_enum")[0]
    fc = [{name: json.dumps(args)} for name, args in entry.ground_truth.items()]
    (tmp_path / "data_normal_atom_enum_result.json").write_text(
        json.dumps({"id": entry.id, "result": fc}) + "\n", encoding="utf-8"
    )
    out = tmp_path / "v.jsonl"
    assert main(["score", "acebench", "--results", str(tmp_path), "--out", str(out)]) == 0
    assert json.loads(out.read_text().splitlines()[0])["error_type"] == "wrong_output_format"  # as upstream
    assert main(["score", "acebench", "--results", str(tmp_path), "--out", str(out), "--fc"]) == 0
    assert json.loads(out.read_text().splitlines()[0])["valid"] is True


def test_unreadable_file_is_reported_not_fatal(tmp_path, capsys, monkeypatch):
    import harness.cli.score_acebench as cli

    for name in ("special_irrelevant", "special_incomplete"):
        (tmp_path / f"data_{name}_result.json").write_text("", encoding="utf-8")
    real = cli.read_results

    def flaky(path):
        if "irrelevant" in path.name:
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(cli, "read_results", flaky)
    assert main(["score", "acebench", "--results", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "cannot be read" in captured.err
    assert "special_irrelevant" in captured.out and "missing" in captured.out
