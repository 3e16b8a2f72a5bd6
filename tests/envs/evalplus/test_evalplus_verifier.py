"""EvalPlus verifier: both verdict modes on canonical, wrong and faked solutions; evalplus's quirks."""

import pytest

from envs.data import has_data

pytestmark = pytest.mark.skipif(not has_data("evalplus"), reason="EvalPlus data not found; set LOPD_DATA_DIR")

FAKE_EQ = (
    "class T:\n    def __eq__(self, o):\n        return True\n"
    "    def __ne__(self, o):\n        return False\n"
    "def {ep}(*a, **k):\n    return T()\n"
)


def canonical(problems, task_id):
    return problems[task_id]["prompt"] + problems[task_id]["canonical_solution"]


@pytest.fixture(scope="module", params=["official", "strict"])
def he(request):
    from envs.evalplus.verifier import EvalPlusVerifier

    v = EvalPlusVerifier("humaneval", mode=request.param)
    yield v
    v.close()


@pytest.fixture(scope="module", params=["official", "strict"])
def mbpp(request):
    from envs.evalplus.verifier import EvalPlusVerifier

    v = EvalPlusVerifier("mbpp", mode=request.param)
    yield v
    v.close()


def test_canonical_passes_and_wrong_fails(he):
    for tid in ("HumanEval/0", "HumanEval/4", "HumanEval/53"):
        v = he.check(tid, canonical(he.problems, tid))
        assert v.passed and (v.base_status, v.plus_status) == ("pass", "pass"), (tid, v)
    v = he.check("HumanEval/53", "def add(x, y):\n    return x - y\n")
    assert not v.passed and v.base_status == "fail"


def test_humaneval_32_always_fails_in_0_3_1(he):
    """evalplus 0.3.1's find_zero oracle `continue`s without marking the input passed."""
    v = he.check("HumanEval/32", canonical(he.problems, "HumanEval/32"))
    assert not v.passed and (v.base_status, v.plus_status) == ("fail", "fail")


def test_faked_equality_official_passes_strict_fails(he):
    v = he.check("HumanEval/53", FAKE_EQ.format(ep="add"))
    assert v.passed is (he.mode == "official")


def test_int_subclass_with_eq_official_passes_strict_fails(he):
    code = (
        "class I(int):\n    def __eq__(self, o):\n        return True\n    __hash__ = int.__hash__\n"
        "def add(x, y):\n    return I(0)\n"
    )
    assert he.check("HumanEval/53", code).passed is (he.mode == "official")


def test_patched_numpy_allclose_official_passes_strict_fails(he):
    # HumanEval/4 returns floats, so evalplus compares with np.allclose in the solution's own process
    code = (
        "import numpy\nnumpy.allclose = lambda *a, **k: True\n"
        "def mean_absolute_deviation(numbers):\n    return 0.0\n"
    )
    assert he.check("HumanEval/4", code).passed is (he.mode == "official")


def test_float_tolerance(he):
    code = canonical(he.problems, "HumanEval/4").replace("return sum(", "return 1e-9 + sum(")
    assert "1e-9" in code and he.check("HumanEval/4", code).passed


@pytest.mark.slow
def test_timeouts_and_exits_are_evalplus_statuses(he):
    assert (lambda v: (v.base_status, v.plus_status))(
        he.check("HumanEval/53", "import os\ndef add(x, y):\n    os._exit(0)\n")
    ) == ("timeout", "timeout")
    v = he.check("HumanEval/53", "def add(x, y):\n    while True:\n        pass\n")
    assert (v.base_status, v.plus_status) == ("fail", "fail")  # the per-input limit raises inside
    v = he.check("HumanEval/53", "import sys\ndef add(x, y):\n    sys.exit(0)\n")
    assert (v.base_status, v.plus_status) == ("fail", "fail")


def test_code_that_does_not_compile_fails_without_a_sandbox(he):
    v = he.check("HumanEval/53", "def add(x, y) return x + y")
    assert (v.base_status, v.plus_status, v.error) == ("fail", "fail", None)
    with pytest.raises(KeyError):
        he.check("HumanEval/999", "pass")


def test_mbpp_special_oracles(mbpp):
    for tid in ("Mbpp/2", "Mbpp/737", "Mbpp/581", "Mbpp/558"):  # set-eq, output-not-None (re.Match), oracles
        assert mbpp.check(tid, canonical(mbpp.problems, tid)).passed, tid
    # set equality: order does not matter
    code = "def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b), reverse=True))\n"
    assert mbpp.check("Mbpp/2", code).passed
    # output-not-None tasks accept any non-None object for a match
    code = "import re\ndef check_str(string):\n    return re.search(r'^[aeiouAEIOU][A-Za-z0-9_]*', string)\n"
    assert mbpp.check("Mbpp/737", code).passed
