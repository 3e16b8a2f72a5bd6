"""The ACEBench official-agreement tooling: runner glue (against a stand-in evaluator), case builders,
comparison and the skip paths. The real comparison needs the reconstructed official evaluator in
/tmp/acebench_official and runs as ``benchmarks/acebench_official_agreement.py``."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import acebench_official_agreement as agreement
from benchmarks.acebench_mutations import agent_cases, fuzz_cases, normal_cases, special_cases
from benchmarks.acebench_synthetic import synthetic_items
from envs.acebench.data import has_acebench, load_category

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "benchmarks" / "acebench_official_runner.py"
needs_data = pytest.mark.skipif(not has_acebench(), reason="ACEBench data not found; set LOPD_DATA_DIR")

# A stand-in with eval_main's function names and calling conventions (not upstream code): valid when
# the result is "ok", a KeyError on "crash"; failures are reported through save_score_as_json.
STAND_IN = """
OUTPUT_PATH = None
language = None


def save_score_as_json(filename, data, subdir=None):
    raise AssertionError("the runner must replace this")


def convert_result_to_excel(*args):
    raise AssertionError("the runner must replace this")


def get_paths(language):
    return {"language": language}


def _score(model_result, prompt):
    if any(r["result"] == "crash" for r in model_result):
        raise KeyError("crash")
    bad = [{"id": p["id"], "valid": False, "error_type": "stand_in_error"}
           for p, r in zip(prompt, model_result) if r["result"] != "ok"]
    save_score_as_json("x.json", [{"accuracy": None}] + bad, OUTPUT_PATH)
    return round((len(model_result) - len(bad)) / len(model_result), 3)


def normal_single_turn_eval(model_result, prompt, possible_answer, test_category, model_name, paths):
    return _score(model_result, prompt)


normal_multi_turn_eval = normal_single_turn_eval


def special_eval(model_result, prompt, possible_answer, category, model_name, paths):
    return _score(model_result, prompt)


def agent_eval(model_result, prompt, possible_answer, test_category, model_name):
    assert language in ("en", "zh")
    return _score(model_result, prompt), 0.5
"""


def _write_data(root: Path) -> None:
    lang = root / "data_en"
    (lang / "possible_answer").mkdir(parents=True)
    for cat in ("normal_atom_bool", "special_irrelevant", "agent_multi_step"):
        ids = [f"{cat}_{i}" for i in range(2)]
        (lang / f"data_{cat}.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
        (lang / "possible_answer" / f"data_{cat}.json").write_text(
            "".join(json.dumps({"id": i, "ground_truth": {}}) + "\n" for i in ids)
        )


def _run(tmp_path: Path, cases: list[dict], *extra: str) -> list[dict]:
    official = tmp_path / "official"
    official.mkdir(exist_ok=True)
    (official / "eval_main.py").write_text(STAND_IN)
    data = tmp_path / "data"
    if not data.exists():
        _write_data(data)
    cin, cout = tmp_path / "cases.jsonl", tmp_path / "out.jsonl"
    cin.write_text("".join(json.dumps(c) + "\n" for c in cases))
    cmd = [
        sys.executable,
        str(RUNNER),
        str(cin),
        str(cout),
        str(data),
        "--official-dir",
        str(official),
        *extra,
    ]
    subprocess.run(cmd, check=True, capture_output=True, timeout=60)
    return [json.loads(line) for line in cout.read_text().splitlines()]


def _case(key, cat, i, result):
    return {"key": key, "id": f"{cat}_{i}", "category": cat, "language": "en", "result": result}


def test_runner_scores_each_case_alone_and_reports_crashes(tmp_path):
    cases = [
        _case("a", "normal_atom_bool", 0, "ok"),
        _case("b", "normal_atom_bool", 1, "bad"),
        _case("c", "special_irrelevant", 0, "crash"),
        {**_case("d", "agent_multi_step", 1, "ok"), "process": []},
    ]
    rows = _run(tmp_path, cases)
    timing = rows.pop()["timing"]
    assert rows == [
        {"key": "a", "valid": True, "error_type": ""},
        {"key": "b", "valid": False, "error_type": "stand_in_error"},
        {"key": "c", "valid": False, "error_type": "official_crash:KeyError"},
        {"key": "d", "valid": True, "error_type": "", "process": 0.5},
    ]
    assert set(timing) == {"normal", "special", "agent"}


def test_runner_bench_mode_scores_whole_categories_per_round(tmp_path):
    cases = [
        _case("a", "normal_atom_bool", 0, "ok"),
        _case("b", "normal_atom_bool", 1, "bad"),
        {**_case("c", "normal_atom_bool", 0, "ok"), "round": 1},
        _case("d", "special_irrelevant", 0, "crash"),
    ]
    rows = _run(tmp_path, cases, "--mode", "bench", "--inner", '{"normal": 3}')
    timing = rows.pop()["timing"]
    assert rows == [
        {"round": 0, "language": "en", "category": "normal_atom_bool", "accuracy": 0.5},
        {"round": 1, "language": "en", "category": "normal_atom_bool", "accuracy": 1.0},
        {
            "round": 0,
            "language": "en",
            "category": "special_irrelevant",
            "accuracy": "official_crash:KeyError",
        },
    ]
    assert timing["normal"] > 0


def test_runner_and_agreement_skip_without_the_official_evaluator(tmp_path, monkeypatch, capsys):
    out = subprocess.run(
        [sys.executable, str(RUNNER), "c", "o", "d", "--official-dir", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "SKIP" in out.stdout
    monkeypatch.setattr(agreement, "OFFICIAL_DIR", tmp_path / "none")
    assert agreement.main(["--official-python", str(tmp_path / "none" / "python")]) == 0
    assert "SKIP" in capsys.readouterr().out


def test_synthetic_items_are_well_formed():
    items = synthetic_items()
    ids = [q["id"] for q, _, _ in items]
    assert len(ids) == len(set(ids)) and all(q["id"] == a["id"] for q, a, _ in items)
    assert sum(len(outs) for _, _, outs in items) > 150


@needs_data
def test_case_builders_cover_every_family():
    normal = load_category("en", "normal_single_turn_parallel_function")[0]
    labels = [label.split(":")[0] for label, _, _ in normal_cases(normal)]
    for want in ("gt", "wrong_value", "missing_param", "extra_param", "wrong_type", "wrong_function"):
        assert want in labels
    for want in ("drop_last_call", "reordered_calls", "double_quotes", "newlines_tabs", "bare_call"):
        assert want in labels
    special = load_category("zh", "special_incomplete")[0]
    assert [label for label, _, _ in special_cases(special)][0] == "gt"
    agent = load_category("en", "agent_multi_turn")[0]
    (label, states, process), *rest = agent_cases(agent)
    assert label == "gt" and isinstance(states, list) and process
    import random

    fz = list(fuzz_cases([normal, special, agent], 9, random.Random(0)))
    assert len(fz) == 9 and all(case[0].startswith("fuzz:") for _, case in fz)


@needs_data
def test_compare_counts_agreements_and_lists_disagreements():
    cases = agreement.build_cases(["en"], ["normal_atom_bool", "special_irrelevant"], 2, 3)
    entries = agreement.dataset_entries(cases)
    from envs.acebench.scoring import verdict

    official = {}
    for c in cases:
        v = verdict(entries[(c["language"], c["id"])], {"id": c["id"], "result": c["result"]})
        official[c["key"]] = {"key": c["key"], "valid": v.valid, "error_type": v.error_type}
    res = agreement.compare(cases, official, entries)
    assert not res["disagreements"] and not res["etype_mismatches"]
    flipped = cases[0]["key"]
    official[flipped] = {**official[flipped], "valid": not official[flipped]["valid"]}
    res = agreement.compare(cases, official, entries)
    assert [d["key"] for d in res["disagreements"]] == [flipped]


@needs_data
def test_round_cases_keep_data_order_with_one_case_per_entry():
    cases = agreement.build_cases(["en"], ["normal_multi_turn_user_adjust"], 6, 0)
    rounds = agreement.round_cases(cases, 3, seed=1, exclude={cases[1]["key"]})
    ids = [e.id for e in load_category("en", "normal_multi_turn_user_adjust")[:6]]
    for r in range(3):
        picked = [c for c in rounds if c["round"] == r]
        assert [c["id"] for c in picked] == ids
        assert cases[1]["key"] not in {c["key"] for c in picked}
    assert all(c["label"] == "gt" for c in rounds if c["round"] == 0)
