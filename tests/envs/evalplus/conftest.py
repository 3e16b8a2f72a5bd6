import pytest

from envs.data import has_data

pytestmark = pytest.mark.skipif(not has_data("evalplus"), reason="EvalPlus data not found; set LOPD_DATA_DIR")


@pytest.fixture(scope="session")
def he_problems():
    if not has_data("evalplus"):
        pytest.skip("EvalPlus data not found; set LOPD_DATA_DIR")
    from envs.evalplus.data import load_problems

    return load_problems("humaneval")


@pytest.fixture(scope="session")
def mbpp_problems():
    if not has_data("evalplus"):
        pytest.skip("EvalPlus data not found; set LOPD_DATA_DIR")
    from envs.evalplus.data import load_problems

    return load_problems("mbpp")


def canonical(problems, task_id):
    return problems[task_id]["prompt"] + problems[task_id]["canonical_solution"]
