import json

import pytest

from envs.core import Task
from envs.mcp.client import CallOutcome
from envs.mcp.tasks import Episode, TaskFileError, contains, load_task_file, score
from envs.trace import CallRecord

GOOD = {"task_id": "t", "prompt": "p", "check": [{"answer_contains": "x"}]}


def write(tmp_path, *rows):
    p = tmp_path / "tasks.jsonl"
    p.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return p


def test_a_good_file_loads_with_splits_and_system(tmp_path):
    tasks = load_task_file(write(tmp_path, GOOD, "", {**GOOD, "task_id": "u", "split": "eval", "system": "S"}))
    assert [(t.task_id, t.split, t.system) for t in tasks] == [("t", "train", None), ("u", "eval", "S")]
    assert tasks[0].data == {"check": GOOD["check"]}


@pytest.mark.parametrize("row, why", [
    ("{not json", "line 2: Expecting property name"),
    ([1, 2], "line 2: a task must be a JSON object"),
    ({**GOOD, "checks": []}, "line 2: unknown key(s) ['checks']"),
    ({**GOOD, "task_id": ""}, "line 2: 'task_id' must be a non-empty string"),
    ({**GOOD, "check": []}, "line 2: 'check' must be a non-empty list"),
    ({**GOOD, "check": [{"answer_contains": "a", "answer_matches": "b"}]}, "check 0: a check has exactly one"),
    ({**GOOD, "check": [{"answer_matches": "("}]}, "check 0: 'answer_matches' is no regular expression"),
    ({**GOOD, "check": [{"called": {"arguments": {}}}]}, "check 0: 'called' must be"),
    ({**GOOD, "check": [{"probe": {"name": "f"}}]}, "a probe needs it"),
    ({**GOOD, "check": [{"probe": {"name": "f"}, "expect": {"near": 1}}]}, "'expect' must be"),
    ({**GOOD, "check": [{"answer_contains": "a", "expect": {"equals": 1}}]}, "'expect' goes with 'probe' only"),
    ({**GOOD, "check": [{"verify": "no_such_module_xyz:f"}]}, "cannot import the verifier"),
    ({**GOOD, "check": [{"verify": "json"}]}, "'verify' must be 'module:function'"),
    (GOOD, "line 2: task_id 't' repeats line 1"),
])
def test_a_bad_line_is_named_with_the_reason(tmp_path, row, why):
    with pytest.raises(TaskFileError) as e:
        load_task_file(write(tmp_path, GOOD, row))
    assert why in str(e.value) and "tasks.jsonl" in str(e.value)


def test_an_empty_or_missing_file_is_an_error(tmp_path):
    with pytest.raises(TaskFileError, match="holds no task"):
        load_task_file(write(tmp_path, ""))
    with pytest.raises(TaskFileError, match="cannot read"):
        load_task_file(tmp_path / "absent.jsonl")


def test_partial_argument_match():
    assert contains({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": 2}})
    assert not contains({"a": 1}, {"a": 2}) and not contains({"a": 1}, {"b": 1}) and not contains(3, {"a": 1})


def good_verifier(episode):
    return episode.answer == "done"


def broken_verifier(episode):
    raise RuntimeError("oops")


def episode(answer="done", calls=(), probe_text="milk, eggs", structured=None):
    probes = []

    def probe(name, args):
        probes.append((name, args))
        return CallOutcome(probe_text, None, structured)
    return Episode(Task("t", "p"), list(calls), answer, probe=probe), probes


def test_every_check_kind_holds_or_fails_for_its_reason():
    ok = CallRecord("add", {"x": 1, "y": 2}, None)
    ok.executed = True
    failed = CallRecord("sub", {"x": 1}, None)
    failed.executed, failed.error = True, "tool_error"
    ep, probes = episode(calls=[ok, failed], structured={"result": ["milk", "eggs"]})
    checks = [{"called": {"name": "add", "arguments": {"x": 1}}}, {"answer_contains": "don"},
              {"answer_matches": "^d.ne$"}, {"probe": {"name": "ls", "arguments": {"a": 1}}, "expect": {"contains": "eggs"}},
              {"probe": {"name": "ls"}, "expect": {"equals": ["milk", "eggs"]}},
              {"verify": f"{__name__}:good_verifier"}]
    reward, verdicts = score(checks, ep)
    assert reward == 1.0 and all(v["held"] for v in verdicts)
    assert probes == [("ls", {"a": 1}), ("ls", {})]
    bad = [{"called": {"name": "sub"}}, {"answer_contains": "zzz"}, {"verify": f"{__name__}:broken_verifier"},
           {"probe": {"name": "ls"}, "expect": {"equals": "milk"}}]
    reward, verdicts = score(bad, ep)
    assert reward == 0.0 and not any(v["held"] for v in verdicts)
    assert "raised RuntimeError: oops" in verdicts[2]["why"]
    reward, verdicts = score([{"answer_contains": ""}], episode(answer=None)[0])
    assert reward == 0.0  # a truncated episode has no final answer
