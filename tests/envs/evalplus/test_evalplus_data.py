"""EvalPlus data: the datasets' sizes and the expected-outputs cache."""

import pytest

from envs.data import has_data
from envs.evalplus import data


@pytest.mark.parametrize("dataset,n", [("humaneval", 164), ("mbpp", 378)])
def test_dataset_sizes(dataset, n):
    if not has_data("evalplus", data.DATA_FILES[dataset]):
        pytest.skip(f"evalplus/{data.DATA_FILES[dataset]} not found; set LOPD_DATA_DIR")
    assert len(data.load_problems(dataset)) == n


def test_expected_outputs_are_computed_once(tmp_path, monkeypatch):
    if not has_data("evalplus", data.DATA_FILES["humaneval"]):
        pytest.skip(f"evalplus/{data.DATA_FILES['humaneval']} not found; set LOPD_DATA_DIR")
    monkeypatch.setenv("LOPD_CACHE_DIR", str(tmp_path))  # an empty cache
    calls = []
    compute = data.compute_expected
    monkeypatch.setattr(data, "compute_expected", lambda *a: calls.append(a) or compute(*a))
    first = data.expected_outputs("humaneval", "HumanEval/0")
    assert len(calls) == 1 and list(tmp_path.rglob("HumanEval_0.pkl"))
    second = data.expected_outputs("humaneval", "HumanEval/0")
    assert len(calls) == 1  # the second load came from the cache
    assert second == first and set(first) == {"base", "base_time", "plus", "plus_time"}
