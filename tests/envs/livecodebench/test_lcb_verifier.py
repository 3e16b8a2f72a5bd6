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


# How each way of reading stdin fares under lcb_runner's stdin mock (testing_util.py at 28fef95e:
# MockStdinWithBuffer behind sys.stdin, then read/readline/readlines patched on the real stdin that the
# header's `from sys import *` bound as `stdin`). Most programs answer own_sum correctly from a real
# stdin; the verdicts are lcb's, checked against a local re-creation of its call_method. Both modes give
# the same verdicts: the mock is how lcb runs the code, not how it compares, and holds only the input.
_TAIL = "n = int(data[0])\nxs = list(map(int, data[1:n + 1]))\nprint(sum(xs))\nprint(sum(xs) / n)\n"
_TWO_LINES = "print(sum(xs))\nprint(sum(xs) / n)\n"
STDIN_IDIOMS = [
    # mock.read() returns the whole input, whatever the arguments
    ("read", "import sys\ndata = sys.stdin.read().split()\n" + _TAIL, [True] * 3),
    ("read_twice", "import sys\nsys.stdin.read()\ndata = sys.stdin.read().split()\n" + _TAIL, [True] * 3),
    ("read_size", "import sys\ndata = sys.stdin.read(1).split()\n" + _TAIL, [True] * 3),
    # ... even after readline consumed a line, so n is read again as a number to add
    (
        "read_after_input",
        "import sys\nn = int(input())\nxs = list(map(int, sys.stdin.read().split()))\n" + _TWO_LINES,
        [-2],
    ),
    # mock.readline() advances through a StringIO of the input and gives "" at the end
    (
        "readline",
        "import sys\nn = int(sys.stdin.readline())\nxs = list(map(int, sys.stdin.readline().split()))\n"
        "assert sys.stdin.readline() == sys.stdin.readline() == ''\n" + _TWO_LINES,
        [True] * 3,
    ),
    # mock.readlines() is input.split("\n"): no newlines kept, a trailing ''
    (
        "readlines",
        "import sys\nlines = sys.stdin.readlines()\nassert lines[-1] == ''\n"
        "n = int(lines[0])\nxs = list(map(int, lines[1].split()))\n" + _TWO_LINES,
        [True] * 3,
    ),
    # ... so joining the lines glues "3" to "1 2 3"
    ("readlines_joined", "import sys\ndata = ''.join(sys.stdin.readlines()).split()\n" + _TAIL, [-2]),
    # the mock defines no __iter__/__next__/__enter__ and Python looks them up on the class, not through
    # its __getattr__: TypeError
    ("iterate", "import sys\ndata = ' '.join(line for line in sys.stdin).split()\n" + _TAIL, [-4]),
    ("next", "import sys\nn = int(next(sys.stdin))\n", [-4]),
    ("with", "import sys\nwith sys.stdin as f:\n    data = f.read().split()\n" + _TAIL, [-4]),
    # mock.buffer.read() gives all the bytes (issue #18: a runtime error while our mock had no buffer)
    ("buffer_read", "import sys\ndata = sys.stdin.buffer.read().split()\n" + _TAIL, [True] * 3),
    # mock.buffer.readline() always gives the first line + b"\n", so the second call reads "3" again
    (
        "buffer_readline",
        "import sys\nn = int(sys.stdin.buffer.readline())\n"
        "xs = list(map(int, sys.stdin.buffer.readline().split()))\n" + _TWO_LINES,
        [-2],
    ),
    # the buffer has read and readline only: AttributeError
    (
        "buffer_readlines",
        "import sys\nlines = sys.stdin.buffer.readlines()\ndata = b' '.join(lines).split()\n" + _TAIL,
        [-4],
    ),
    (
        "buffer_wrapped",
        "import io, sys\ndata = io.TextIOWrapper(sys.stdin.buffer).read().split()\n" + _TAIL,
        [-4],
    ),
    # fileno goes through __getattr__ to StringIO.fileno: io.UnsupportedOperation
    ("fileno", "import os, sys\ndata = os.read(sys.stdin.fileno(), 1 << 20).split()\n" + _TAIL, [-4]),
    # the header's `from io import *` / `from builtins import *` bound the name `open` to the real open before
    # builtins.open was patched, so open(0) reads the process's own fd 0 (nothing: at its end here, /dev/null
    # in a non-interactive lcb run) and data[0] is an IndexError ...
    ("open0", "data = open(0).read().split()\n" + _TAIL, [-4]),
    ("open0_sum", "data = open(0).read().split()\nprint(sum(map(int, data[1:])))\n", [-2]),
    # ... while builtins.open looked up at call time is the mock_open with the input
    ("builtins_open0", "import builtins\ndata = builtins.open(0).read().split()\n" + _TAIL, [True] * 3),
    # input() reads through mock.readline (fileno fails, so no tty path); EOFError past the end
    ("input", SUM_OK, [True] * 3),
    (
        "input_past_end",
        "n = int(input())\nxs = list(map(int, input().split()))\ninput()\ninput()\n" + _TWO_LINES,
        [-4],
    ),
    # the header-bound `stdin` is the real stdin with patched methods: readline is next() on the lines ...
    (
        "stdin_readline",
        "n = int(stdin.readline())\nxs = list(map(int, stdin.readline().split()))\n" + _TWO_LINES,
        [True] * 3,
    ),
    # ... which raises StopIteration past the last line ("3", "1 2 3", "" and then nothing)
    (
        "stdin_readline_past_end",
        "n = int(stdin.readline())\nxs = list(map(int, stdin.readline().split()))\n"
        "stdin.readline()\nstdin.readline()\n" + _TWO_LINES,
        [-4],
    ),
    ("stdin_read", "data = stdin.read().split()\n" + _TAIL, [True] * 3),
    # its buffer is the real (empty) one: data[0] is an IndexError
    ("stdin_buffer_read", "data = stdin.buffer.read().split()\n" + _TAIL, [-4]),
]


@pytest.mark.parametrize("code, expected", [c[1:] for c in STDIN_IDIOMS], ids=[c[0] for c in STDIN_IDIOMS])
def test_stdin_idioms_as_lcb(verifier, own, code, expected):
    assert verifier.check(own["own_sum"], code).results == expected


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
