"""Rendering (observation-lite, exact calls) and ingestion (filters, dedupe, source refs)."""

from __future__ import annotations

import json

import pytest

from envs.trace import CallRecord, Episode, Step, TraceError, write_traces
from lopd.bank import BankConfig, render_episode
from lopd.bank.ingest import IngestReport, experiences_from_episodes, experiences_from_traces

from bank_fixtures import make_episode, task_episodes


def _lines(traj, kind):
    return [line for line in traj.splitlines() if f"] {kind}" in line]


def test_tool_calls_are_exact_and_observations_cut():
    args = {"query": "café  \"naïve\"\n", "nested": {"ids": [1, 2.5, None, True]}, "empty": ""}
    big = "{\n" + "\n".join(f'    "k{i}":   "{"v" * 30}",' for i in range(40)) + "\n}"
    ep = make_episode("e", "t", "Do it", [("search", args, big)])
    task, traj = render_episode(ep, observation_chars=100)
    assert task == "Do it"
    (action,) = _lines(traj, "Action")
    payload = json.loads(action.split("Action: ", 1)[1])
    assert payload == {"name": "search", "arguments": args}  # exact, unicode and whitespace kept
    (result,) = _lines(traj, "Result")
    body = result.split("Result: ", 1)[1]
    collapsed = " ".join(big.split())
    assert body.startswith(collapsed[:90]) and body.endswith(f"...[+{len(collapsed) - 100} chars]")
    assert "    " not in body  # indentation collapsed
    _, whole = render_episode(ep, observation_chars=-1)
    assert collapsed in whole
    _, none = render_episode(ep, observation_chars=0)
    assert "Result" not in none and "Action" in none


def test_reasoning_dropped_and_final_answer_cut():
    ep = make_episode("e", "t", "Do it", [], final="<think>" + "hmm " * 100 + "</think>" + "Answer " * 50)
    _, traj = render_episode(ep, response_chars=20)
    assert "hmm" not in traj and traj.startswith("[1] Response: Answer Answer") and "...[+" in traj
    _, kept = render_episode(ep, response_chars=-1, keep_reasoning=True)
    assert "hmm" in kept


def test_unexecuted_and_unparsed_calls():
    step = Step(0, "x", calls=[CallRecord("first", {"a": 1}, executed=True, result="ok"),
                               CallRecord("second", {"b": 2}, executed=False),
                               CallRecord(None, None, parse_error="bad JSON")])
    ep = Episode("e", "t", messages=[{"role": "user", "content": "go"}], steps=[step], reward=1.0)
    _, traj = render_episode(ep)
    assert '"first"' in traj and "second" not in traj and "bad JSON" not in traj
    _, traj = render_episode(ep, executed_calls_only=False)
    assert 'Action (not executed): {"name": "second", "arguments": {"b": 2}}' in traj


def test_filters_by_reward_and_split_and_dedupes(tmp_path):
    eps = task_episodes()
    low = make_episode("lopd/shop-v0", "low", "A task that went badly.", [], reward=0.5)
    ev = make_episode("lopd/shop-v0", "ev", "An evaluation task.", [], split="eval")
    test = make_episode("lopd/shop-v0", "te", "A test task.", [], split="test")
    dup = task_episodes()[0]
    no_task = Episode("lopd/shop-v0", "nt", reward=1.0)
    path = tmp_path / "t.jsonl"
    write_traces(path, eps + [low, ev, test, dup, no_task])
    report = IngestReport()
    exps = list(experiences_from_traces([path], BankConfig(), report))
    assert [e.task_id for e in exps] == [e.task_id for e in eps]
    assert (report.episodes, report.kept, report.skipped_reward, report.skipped_split,
            report.skipped_duplicate, report.skipped_no_task) == (11, 6, 1, 2, 1, 1)
    report = IngestReport()
    exps = list(experiences_from_traces([path], BankConfig(min_reward=0.5), report))
    assert "low" in {e.task_id for e in exps} and report.skipped_split == 2
    assert "11 episode(s): kept 7" in report.summary()


def test_source_reference_file_line_and_index(tmp_path):
    path = tmp_path / "t.jsonl"
    eps = task_episodes()[:3]
    with open(path, "w") as f:
        f.write(eps[0].to_json() + "\n\n")          # line 1, then a blank line 2
        f.write('{"torn": \n')                      # line 3: unreadable
        f.write(eps[1].to_json() + "\n" + eps[2].to_json() + "\n")  # lines 4, 5
    report = IngestReport()
    exps = list(experiences_from_traces([path], BankConfig(), report))
    assert [(e.source.line, e.source.episode_index) for e in exps] == [(1, 0), (4, 1), (5, 2)]
    assert exps[0].source.file == str(path.resolve())
    assert (exps[1].env_id, exps[1].task_id, exps[1].reward) == ("lopd/shop-v0", eps[1].task_id, 1.0)
    assert len(report.errors) == 1 and ":3:" in report.errors[0]
    with pytest.raises(TraceError, match=":3:"):
        list(experiences_from_traces([path], BankConfig(on_trace_error="raise"), IngestReport()))


def test_config_refuses_eval_splits_and_bad_values():
    for split in ("eval", "test", "Validation"):
        with pytest.raises(ValueError, match="evaluation splits"):
            BankConfig(train_splits=["train", split])
    with pytest.raises(ValueError):
        BankConfig(observation_chars=-2)
    with pytest.raises(ValueError):
        BankConfig(top_k=0)
    for reward in (1.01, -0.1, float("nan")):  # rewards lie in [0, 1]: above 1 the bank would stay empty
        with pytest.raises(ValueError, match="min_reward must lie in"):
            BankConfig(min_reward=reward)
    assert BankConfig(min_reward=0.0).min_reward == 0.0
    assert BankConfig(train_splits=["train", "train_extra"]).train_splits == ["train", "train_extra"]


def test_in_memory_episodes_and_nan_reward():
    eps = task_episodes()[:2]
    eps[1].reward = float("nan")
    report = IngestReport()
    exps = list(experiences_from_episodes(eps, BankConfig(), report, label="step-3"))
    assert len(exps) == 1 and str(exps[0].source) == "step-3#0" and report.skipped_reward == 1


def test_chat_template_render_is_the_stored_conversation_through_the_template():
    """render=chat_template (the authors' experience text): the conversation and its tools through the
    tokenizer's chat template, whole, with no 'Task:' wrapper; it needs a tokenizer folder."""
    from harness.models.pinned import PINNED_DIR
    from transformers import AutoTokenizer

    ep = make_episode("e", "t", "Do it", [("search", {"q": "x"}, "r" * 900)])
    ep.messages += [{"role": "assistant", "content": '<tool_call>{"name": "search"}</tool_call>'},
                    {"role": "tool", "content": "r" * 900}]
    cfg = BankConfig(render="chat_template", template_tokenizer=str(PINNED_DIR))
    (exp,) = experiences_from_episodes([ep], cfg, IngestReport())
    want = AutoTokenizer.from_pretrained(str(PINNED_DIR)).apply_chat_template(ep.messages, tokenize=False)
    assert exp.text == want and "r" * 900 in exp.text  # tool results whole, no observation cut
    (lite,) = experiences_from_episodes([ep], BankConfig(), IngestReport())
    assert lite.text.startswith("Task: Do it") and "r" * 900 not in lite.text
    with pytest.raises(ValueError, match="template_tokenizer"):
        list(experiences_from_episodes([ep], BankConfig(render="chat_template"), IngestReport()))
