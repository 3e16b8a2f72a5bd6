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


def mapping(problems, task_id, nbytes):
    """The canonical solution, which also maps ``nbytes`` of anonymous memory (address space, no RAM)."""
    ep = problems[task_id]["entry_point"]
    return canonical(problems, task_id) + (
        f"\n_answer = {ep}\n\ndef {ep}(*a):\n    import mmap\n    m = mmap.mmap(-1, {nbytes})\n"
        "    return _answer(*a)\n"
    )


def test_official_memory_headroom_is_evaluates(he, mbpp):
    """evalplus's 4 GiB guard is an RLIMIT_AS on a check process forked from evalplus.evaluate's pool worker,
    which already maps the main process (every task's expected outputs, ~2.1 GB for HumanEval+, ~3.1 GB for
    MBPP+). Measured under evaluate (docs/SANDBOX.md): HumanEval/0 passes mapping 2.1 GB, fails 2.2 GB;
    Mbpp/2 passes 1.0 GB, fails 1.1 GB. strict keeps the guard over the worker's own memory only."""
    if he.mode != mbpp.mode:
        pytest.skip("one mode at a time")
    cases = ((he, "HumanEval/0", 1_500_000_000, 2_500_000_000), (mbpp, "Mbpp/2", 600_000_000, 1_500_000_000))
    for v, tid, fits, too_big in cases:
        assert v.check(tid, mapping(v.problems, tid, fits)).passed, tid
        assert v.check(tid, mapping(v.problems, tid, too_big)).passed is (v.mode == "strict"), tid


def test_official_vm_bytes_0_is_check_correctness_alone():
    from envs.evalplus.verifier import EvalPlusVerifier

    with EvalPlusVerifier("mbpp", mode="official", official_vm_bytes=0) as v:
        assert v.check("Mbpp/2", mapping(v.problems, "Mbpp/2", 1_500_000_000)).passed


@pytest.mark.slow
def test_mbpp_255_canonical_fails_plus_in_official_as_under_evaluate(mbpp):
    """The reported case (about 4 GB of memory here): the canonical answer's 1.7M-tuple output for
    plus input 85 does not fit in what evaluate's check process has left under 4 GiB (MemoryError)."""
    if mbpp.mode == "strict":
        pytest.skip("strict has the full 4 GiB; its plus verdict here is load-dependent (docs/SANDBOX.md)")
    v = mbpp.check("Mbpp/255", canonical(mbpp.problems, "Mbpp/255"))
    assert (v.base_status, v.plus_status) == ("pass", "fail") and not v.plus_details[-1]
