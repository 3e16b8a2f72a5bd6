"""LiveCodeBench grading: lcb_runner's result codes for stdin and call-based problems, both modes."""

import pytest
from lcb_records import SUM_OK, TWO_SUM_OK

from envs.data import has_data, require_data
from envs.livecodebench.data import load_problems
from envs.livecodebench.verifier import LCBVerifier, extract_code


@pytest.fixture(scope="module", params=["official", "strict"])
def verifier(request):
    v = LCBVerifier(mode=request.param, timeout=1)  # 1 s per test keeps the time-limit cases quick
    yield v
    v.close()


@pytest.fixture
def own(own_file):
    return {p.question_id: p for p in load_problems(own_file)}


def test_stdin_result_codes(verifier, own):
    p = own["own_sum"]
    assert verifier.check(p, SUM_OK).results == [True, True, True]  # "5.5" matches "5.50" as Decimal
    v = verifier.check(p, SUM_OK.replace("print(sum(xs))\n", "print(sum(xs) + (n == 2))\n"))
    assert v.results == [True, -2] and not v.passed
    assert verifier.check(p, "print(1)").results == [-2]  # line count differs
    assert verifier.check(p, "n = int(input())\nprint(1 / 0)").results == [-4]
    assert verifier.check(p, "def (:").results == [-4]  # does not compile
    # lcb wraps stdin code in a function, so a top-level `return` is legal there
    assert verifier.check(p, SUM_OK + "return\n").passed
    main_guard = (
        "def main():\n"
        + "".join("    " + line + "\n" for line in SUM_OK.splitlines())
        + "if __name__ == '__main__':\n    main()\n"
    )
    assert verifier.check(p, main_guard).passed
    assert verifier.check(p, "import sys\n" + SUM_OK + "sys.exit(0)\n").passed  # SystemExit is caught
    # lcb quirks: sys.stdin is a StringIO (no .buffer) and the header's `from builtins import *` binds the
    # real open, so open(0) reads nothing
    assert verifier.check(p, "import sys\nprint(sys.stdin.buffer.read())").results == [-4]
    assert verifier.check(p, "data = open(0).read().split()\nprint(sum(map(int, data[1:])))").results == [-2]
    stdin_names = (
        "n = int(stdin.readline())\nxs = list(map(int, stdin.readline().split()))\n"
        "print(sum(xs))\nprint(sum(xs) / n)\n"
    )
    assert verifier.check(p, stdin_names).passed


def test_call_based_result_codes(verifier, own):
    p = own["own_twosum"]
    assert verifier.check(p, TWO_SUM_OK).results == [True, True, True]
    assert verifier.check(
        p, TWO_SUM_OK.replace("return [", "return (").replace("i]", "i)")
    ).passed  # tuple -> list
    assert verifier.check(
        p, "class Solution:\n    def twoSum(self, nums, target):\n        return [0, 1]"
    ).results == [True, False]
    assert verifier.check(
        p, "class Solution:\n    def twoSum(self, nums, target):\n        return 1 / 0"
    ).results == [-4]
    assert verifier.check(p, "class Solution:\n    def other(self):\n        pass").results == [
        -4
    ]  # no method
    v = verifier.check(p, "import sys\nsys.exit(0)\nclass Solution:\n    pass")
    assert v.results == [-2] and v.global_timeout and v.metadata["error_code"] == -5  # lcb_runner's record


def test_faked_equality(verifier, own):
    fake = (
        "class T:\n    def __eq__(self, o):\n        return True\n"
        "class Solution:\n    def twoSum(self, nums, target):\n"
        "        return T()\n"
    )
    assert verifier.check(own["own_twosum"], fake).passed is (verifier.mode == "official")


@pytest.mark.slow
def test_time_limit_per_test(verifier, own):
    assert verifier.check(own["own_sum"], "while True:\n    pass").results == [-3]


@pytest.mark.slow
def test_global_timeout(own):
    # swallowing the per-test alarm leaves only the global limit, (1 + 1) * 3 + 5 s
    with LCBVerifier(mode="official", timeout=1) as v:
        code = (
            "while True:\n    try:\n        while True:\n            pass\n"
            "    except Exception:\n        pass\n"
        )
        r = v.check(own["own_sum"], code)
    assert r.results == [-2] and r.global_timeout and not r.passed


@pytest.mark.skipif(not has_data("livecodebench"), reason="LiveCodeBench data not found; set LOPD_DATA_DIR")
def test_staged_records(verifier):
    fixture = load_problems(
        require_data("livecodebench", "fixtures", "lcb_codegen_lite_sample_1873_A.jsonl")
    )[0]
    code = (
        "t = int(input())\nfor _ in range(t):\n    s = input().strip()\n"
        "    print('YES' if sum(a != b for a, b in zip(s, 'abc')) in (0, 2) else 'NO')\n"
    )
    assert verifier.check(fixture, code).results == [True] * 5  # 1 public + 4 decoded private tests
    seniors = next(p for p in load_problems() if p.question_id == "2727")
    code = (
        "class Solution:\n    def countSeniors(self, details: List[str]) -> int:\n"
        "        return sum(int(d[11:13]) > 60 for d in details)\n"
    )
    assert verifier.check(seniors, code).passed


def test_extract_code_takes_the_last_fenced_block():
    text = "plan\n```python\nprint(1)\n```\nbetter:\n```python\nprint(2)\nprint(3)\n```\nbye"
    assert extract_code(text) == "print(2)\nprint(3)"
    assert extract_code("```python\nprint(1)") == "" and extract_code("no code") == ""
