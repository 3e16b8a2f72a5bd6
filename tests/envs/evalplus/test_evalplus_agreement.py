"""Agreement with evalplus 0.3.1 itself: its ``check_correctness`` (what ``evalplus.evaluate`` runs per
sample) and our env must give identical base/plus statuses on canonical and mutated solutions, on the
local and the docker sandbox backends (docker skips with the reason when its daemon or image is missing).

The subset (cheap HumanEval+ and MBPP+ tasks, special oracles included) keeps this inside the test
budget; benchmarks/bench_evalplus.py compares all 164 HumanEval+ canonical solutions.
"""

from concurrent.futures import ThreadPoolExecutor

import pytest

from envs.data import has_data
from envs.sandbox import SandboxConfig

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not has_data("evalplus"), reason="EvalPlus data not found; set LOPD_DATA_DIR"),
]

BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]
HE_TASKS = [
    "HumanEval/0",
    "HumanEval/2",
    "HumanEval/4",
    "HumanEval/7",
    "HumanEval/23",
    "HumanEval/28",
    "HumanEval/32",
    "HumanEval/41",
    "HumanEval/53",
    "HumanEval/55",
    "HumanEval/60",
    "HumanEval/63",
]
MBPP_TASKS = [
    "Mbpp/2",
    "Mbpp/7",
    "Mbpp/558",
    "Mbpp/581",
    "Mbpp/737",
    "Mbpp/787",
    "Mbpp/794",
    "Mbpp/455",
    "Mbpp/762",
    "Mbpp/793",
]
# textual mutations of the canonical solution (first occurrence); no-op mutants are dropped
SWAPS = [
    (" < ", " <= "),
    (" > ", " >= "),
    (" + 1", " + 2"),
    (" - 1", " - 2"),
    (" == ", " != "),
    (" and ", " or "),
    ("[1:]", "[2:]"),
    ("return True", "return False"),
    (" * ", " + "),
]


def variants(problem):
    """(name, solution, is_a_fake) for the canonical solution and its mutants."""
    code = problem["prompt"] + problem["canonical_solution"]
    ep = problem["entry_point"]
    out = [("canonical", code, False)]
    for a, b in SWAPS:
        if a in problem["canonical_solution"] and len(out) < 4:
            out.append(
                (
                    f"swap {a.strip()}",
                    problem["prompt"] + problem["canonical_solution"].replace(a, b, 1),
                    False,
                )
            )
    out.append(("raises", f"def {ep}(*args):\n    raise ValueError('mutant')\n", False))
    out.append(("returns None", f"def {ep}(*args):\n    return None\n", False))
    out.append(("prints and returns None", f"def {ep}(*args):\n    print('noise')\n    return None\n", False))
    out.append(
        (
            "fake __eq__",
            f"class T:\n    def __eq__(self, o):\n        return True\ndef {ep}(*args):\n    return T()\n",
            True,
        )
    )
    return out


def evalplus_statuses(dataset, problem, solution, expected):
    """evalplus's own per-sample evaluation (evalplus.evaluate.check_correctness), fast_check as its CLI."""
    from evalplus.evaluate import check_correctness

    r = check_correctness(dataset, 0, problem, solution, expected, base_only=False, fast_check=True)
    return r["base"][0], r["plus"][0]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dataset,tasks", [("humaneval", HE_TASKS), ("mbpp", MBPP_TASKS)])
def test_identical_verdicts_to_evalplus(dataset, tasks, backend):
    from envs.evalplus.data import expected_outputs, load_problems
    from envs.evalplus.verifier import EvalPlusVerifier

    if backend == "docker":
        from envs.sandbox.docker_backend import docker_unavailable_reason

        if reason := docker_unavailable_reason():
            pytest.skip(f"docker sandbox unavailable: {reason}")
    cfg = SandboxConfig(backend=backend)
    problems = load_problems(dataset)
    cases = [(tid, name, sol, fake) for tid in tasks for name, sol, fake in variants(problems[tid])]
    with ThreadPoolExecutor(2) as pool:
        theirs = list(
            pool.map(
                lambda c: evalplus_statuses(dataset, problems[c[0]], c[2], expected_outputs(dataset, c[0])),
                cases,
            )
        )
    with (
        EvalPlusVerifier(dataset, mode="official", sandbox_config=cfg) as official,
        EvalPlusVerifier(dataset, mode="strict", sandbox_config=cfg) as strict,
    ):
        assert official.sandbox.name == strict.sandbox.name == backend
        ours_official = official.check_many([(c[0], c[2]) for c in cases], workers=2)
        ours_strict = strict.check_many([(c[0], c[2]) for c in cases], workers=2)
    mismatches = []
    for c, t, o, s in zip(cases, theirs, ours_official, ours_strict):
        if (o.base_status, o.plus_status) != t:
            mismatches.append(("official", c[0], c[1], t, (o.base_status, o.plus_status), o.error))
        # strict rejects a fake in every phase that has inputs (an empty phase passes, as in evalplus)
        strict_expect = tuple(
            "fail" if c[3] and problems[c[0]][f"{ph}_input"] else st for ph, st in zip(("base", "plus"), t)
        )
        if (s.base_status, s.plus_status) != strict_expect:
            mismatches.append(("strict", c[0], c[1], strict_expect, (s.base_status, s.plus_status), s.error))
    assert not mismatches, mismatches
    # the subset exercises both outcomes
    assert any(t == ("pass", "pass") for t in theirs) and any(t != ("pass", "pass") for t in theirs)
