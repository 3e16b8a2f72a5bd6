import json
import math

import pytest

from envs.trace import CallRecord, Episode, Step, TraceError, TraceWriter, read_traces, write_traces


def make_episode(i=0, split="train"):
    return Episode(
        env_id="lopd/shop-v0", task_id=f"t{i}", split=split, seed=i,
        messages=[{"role": "system", "content": "tools…"}, {"role": "user", "content": "Buy 2 apples 🍎"}],
        tools=[{"type": "function", "function": {"name": "price", "parameters": {}}}],
        prompt_token_ids=[1, 2, 3],
        steps=[Step(index=0, text='<tool_call>{"name": "price"}</tool_call>', token_ids=[5, 6], logprobs=[-0.1, -1e-9],
                    calls=[CallRecord("price", {"item": "apple"}, executed=True, result="2")],
                    observation="<tool_response>\n2\n</tool_response>", observation_token_ids=[7],
                    timings={"generate": 0.25, "env": 1e-4}),
               Step(index=1, text="done", logprobs=[-math.inf], reward=1.0, terminated=True,
                    calls=[CallRecord(None, None, parse_error="bad JSON")], parse_error="unclosed")],
        reward=1.0, terminated=True, timings={"total": 0.3}, meta={"learner": "grpo", "generation": i},
    )


def test_round_trip_is_byte_exact(tmp_path):
    path = tmp_path / "a.jsonl"
    write_traces(path, [make_episode(i) for i in range(3)])
    original = path.read_bytes()
    copy = tmp_path / "b.jsonl"
    write_traces(copy, read_traces(path))
    assert copy.read_bytes() == original
    eps = list(read_traces(path))
    assert eps[0] == make_episode(0)
    assert eps[0].steps[1].logprobs == [-math.inf] and eps[0].n_tool_calls == 2


def test_lone_surrogate_in_model_output_is_written_and_read_back(tmp_path):
    ep = make_episode(0)
    ep.steps[0].text = "bad \ud800 half"  # decodable model output can still hold one
    path = tmp_path / "s.jsonl"
    write_traces(path, [ep])
    (back,) = read_traces(path)
    assert back == ep
    copy = tmp_path / "c.jsonl"
    write_traces(copy, [back])
    assert copy.read_bytes() == path.read_bytes()


def test_append_without_rewriting(tmp_path):
    path = tmp_path / "t.jsonl"
    write_traces(path, [make_episode(0)])
    first = path.read_bytes()
    with TraceWriter(path) as w:
        w.write(make_episode(1))
    assert path.read_bytes().startswith(first)
    assert [e.task_id for e in read_traces(path)] == ["t0", "t1"]


def test_corrupt_lines_name_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    good = make_episode(0).to_json()
    future = json.loads(good) | {"version": 99}
    extra = json.loads(good) | {"surprise": 1}
    path.write_bytes("\n".join([good, '{"env_id": "x", "tru', json.dumps(future), json.dumps(extra), "",
                                good]).encode() + b"\n\xff\xfe\n" + b"[1, 2]\n")
    with pytest.raises(TraceError, match=r"bad.jsonl:2: JSONDecodeError") as exc:
        list(read_traces(path))
    assert exc.value.line == 2
    errors = []
    eps = list(read_traces(path, on_error="skip", errors=errors))
    assert len(eps) == 2
    assert [e.line for e in errors] == [2, 3, 4, 7, 8]
    assert "unknown trace version 99" in errors[1].reason
    assert "unknown Episode field(s): ['surprise']" in errors[2].reason
    assert "UnicodeDecodeError" in errors[3].reason
    with pytest.warns(UserWarning) as caught:
        assert len(list(read_traces(path, on_error="warn"))) == 2
    assert [str(w.message).split(": ")[0].rsplit(":", 1)[1] for w in caught] == ["2", "3", "4", "7", "8"]


def test_torn_tail_is_repaired_before_appending(tmp_path):
    path = tmp_path / "torn.jsonl"
    path.write_text(make_episode(0).to_json() + "\n" + make_episode(1).to_json()[:50])
    write_traces(path, [make_episode(2)])
    errors = []
    assert [e.task_id for e in read_traces(path, on_error="skip", errors=errors)] == ["t0", "t2"]
    assert [e.line for e in errors] == [2]


def test_step_error_counts():
    ep = make_episode()
    assert ep.steps[1].n_parse_errors == 2 and ep.steps[0].n_tool_errors == 0
