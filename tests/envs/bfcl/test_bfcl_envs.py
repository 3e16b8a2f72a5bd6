"""The BFCL-v3 environments: check_env for every id, episode flow, multi-turn rules, env == scorer."""
import json

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401  (registers the ids)
from envs.bfcl import data
from envs.bfcl.data import entries_by_id
from envs.bfcl.execution import ApiSession
from envs.bfcl.multi_turn import MAX_STEPS_PER_TURN, MultiTurnRun, check_multi_turn
from envs.bfcl.registration import CATEGORIES, env_id
from envs.bfcl.replay import ground_truth_output
from envs.bfcl.scoring import score_entry
from envs.data import has_data
from envs.protocol import render_tool_calls
from envs.registry import registered_ids

pytestmark = pytest.mark.skipif(not has_data("bfcl_v3"), reason="BFCL-v3 data not found; set LOPD_DATA_DIR")


@pytest.mark.parametrize("fmt", ["fc", "prompt"])
@pytest.mark.parametrize("category", CATEGORIES)
def test_check_env_passes(category, fmt):
    env = gym.make(env_id(category), fmt=fmt)
    try:
        check_env(env.unwrapped, skip_render_check=False)
    finally:
        env.close()


def test_registered_envs_hold_all_4441_entries_and_each_resets():
    ids = [i for i in registered_ids() if i.startswith("lopd/bfcl-v3-")]
    envs_ = [gym.make(i).unwrapped for i in ids]
    assert [e.category for e in envs_] == data.CATEGORIES == CATEGORIES
    assert sum(len(e.tasks) for e in envs_) == 4441
    for env in envs_:
        for task in env.tasks:
            _, info = env.reset(options={"task_id": task.task_id})
            assert info["task_id"] == task.task_id and info["category"] == env.category
        env.close()


def _as_text(raw, fmt):
    """A model response whose BFCL result is ``raw``."""
    if fmt == "prompt":
        return raw
    if isinstance(raw, str):
        return raw
    return render_tool_calls([(k, json.loads(v)) for c in raw for k, v in c.items()])


def _play(category, entry_id, fmt, turns=None):
    env = gym.make(env_id(category), fmt=fmt).unwrapped
    env.reset(options={"task_id": entry_id})
    e = env.state.entry
    if turns is None:
        turns = ground_truth_output(e, fmt)
    for t, steps in enumerate(turns):
        for s in steps:
            obs, r, term, trunc, info = env.step(_as_text(s, fmt))
            if term or trunc:
                return r, info
        obs, r, term, trunc, info = env.step("All done.")
        if term or trunc:
            return r, info
    return r, info


@pytest.mark.parametrize("fmt", ["fc", "prompt"])
@pytest.mark.parametrize("category, entry_id", [
    ("simple", "simple_0"), ("java", "java_2"), ("javascript", "javascript_0"), ("parallel", "parallel_0"),
    ("live_multiple", "live_multiple_0-0-0"), ("multi_turn_base", "multi_turn_base_0"),
    ("multi_turn_miss_func", "multi_turn_miss_func_0"), ("multi_turn_miss_param", "multi_turn_miss_param_0"),
    ("multi_turn_long_context", "multi_turn_long_context_0")])
def test_ground_truth_through_the_env_scores_one_and_matches_the_scorer(category, entry_id, fmt):
    entry = entries_by_id(category)[entry_id]
    if category.startswith("multi_turn"):
        reward, info = _play(category, entry_id, fmt)
    else:
        env = gym.make(env_id(category), fmt=fmt).unwrapped
        env.reset(options={"task_id": entry_id})
        _, reward, term, trunc, info = env.step(_as_text(ground_truth_output(entry, fmt), fmt))
        assert term and not trunc
    assert reward == 1.0, info["verdict"]
    assert score_entry(entry, info["bfcl_result"], fmt).valid


def test_wrong_answers_score_zero_and_env_equals_scorer():
    env = gym.make(env_id("simple"), fmt="prompt").unwrapped
    env.reset(options={"task_id": "simple_0"})
    _, r, term, _, info = env.step("<think>easy</think>[calculate_triangle_area(base=10, height=6)]")
    assert (r, term, info["verdict"]["error_type"]) == (0.0, True, "value_error:others")
    assert env.step("again")[4] == {"error": "episode_over"}
    fc = gym.make(env_id("irrelevance"), fmt="fc").unwrapped
    fc.reset(options={"task_id": "irrelevance_0"})
    assert fc.step("No function fits this question.")[1] == 1.0
    fc.reset(options={"task_id": "irrelevance_0"})
    assert fc.step('<tool_call>\n{"name": "x", "arguments": {}}\n</tool_call>')[1] == 0.0


def test_fc_prompt_shows_underscored_tools_and_prompt_format_shows_bfcl_system_prompt():
    env = gym.make(env_id("simple"), fmt="fc").unwrapped
    _, info = env.reset(options={"task_id": "simple_1"})
    assert info["tools"][0]["function"]["name"] == "math_factorial"
    assert "<tools>" in info["messages"][0]["content"]
    env = gym.make(env_id("simple"), fmt="prompt").unwrapped
    _, info = env.reset(options={"task_id": "simple_1"})
    assert info["tools"] == [] and "[func_name1(params_name1=params_value1" in info["messages"][0]["content"]


def test_miss_func_turn_brings_the_docs_back():
    entry = entries_by_id("multi_turn_miss_func")["multi_turn_miss_func_0"]
    assert "sort" not in [f["name"] for f in entry.functions]
    env = gym.make(env_id("multi_turn_miss_func"), fmt="fc").unwrapped
    env.reset(options={"task_id": entry.id})
    names = lambda tools: [t["function"]["name"] for t in tools]  # noqa: E731
    info = {}
    for _ in range(3):  # turns 0-2 answered with text: each ends its turn
        obs, r, term, trunc, info = env.step("I need more details.")
    assert obs == "I have updated some more functions you can choose from. What about now?"
    assert "sort" in names(info["tools"]) and "sort" in info["system"]


def _mt_env(fmt="prompt"):
    env = gym.make(env_id("multi_turn_base"), fmt=fmt).unwrapped
    env.reset(options={"task_id": "multi_turn_base_0"})
    return env


def test_more_than_20_steps_in_a_turn_force_quits():
    env = _mt_env()
    for i in range(MAX_STEPS_PER_TURN):
        obs, r, term, trunc, _ = env.step("[pwd()]")
        assert not (term or trunc), i
    obs, r, term, trunc, info = env.step("[pwd()]")
    assert trunc and not term and r == 0.0
    assert info["verdict"]["error_type"] == "multi_turn:force_terminated"
    assert score_entry(env.state.entry, info["bfcl_result"], "prompt").error_type == "multi_turn:force_terminated"


def test_force_quit_in_the_last_turn_is_checked_normally():
    # Upstream keeps every turn when the force-quit happens in the last turn, so the checker runs.
    entry = entries_by_id("multi_turn_base")["multi_turn_base_0"]
    turns = ground_truth_output(entry, "prompt")
    env = _mt_env()
    for steps in turns[:-1]:
        for s in steps:
            env.step(s)
        env.step("ok")
    for s in turns[-1]:
        env.step(s)
    for _ in range(MAX_STEPS_PER_TURN + 1 - len(turns[-1]) - 1):
        assert not env.step("[pwd()]")[3]
    _, r, term, trunc, info = env.step("[pwd()]")
    assert trunc and r == 1.0, info["verdict"]
    assert score_entry(entry, info["bfcl_result"], "prompt").valid


def test_multi_turn_failure_kinds():
    entry = entries_by_id("multi_turn_base")["multi_turn_base_0"]
    gt = [list(t) for t in entry.answer]
    assert check_multi_turn([[t] for t in gt[:-1]], entry).error_type == "multi_turn:force_terminated"
    empty = [[t] for t in gt]
    empty[0] = []
    assert check_multi_turn(empty, entry).error_type == "multi_turn:empty_turn_model_response"
    wrong = [[t] for t in gt]
    wrong[0] = [gt[0][:-1]]  # drops the mv: the file system differs
    assert check_multi_turn(wrong, entry).error_type == "multi_turn:instance_state_mismatch"
    run = MultiTurnRun(entry)
    run.step(["ls()"])  # a read-only call, but turn 0's mkdir and mv are missing: the state differs
    assert run.end_turn().error_type == "multi_turn:instance_state_mismatch"


def test_multi_turn_response_check():
    # Turn 1 is cd + grep; the grep is read-only, so dropping it leaves the state equal and only the
    # response check (the grep's matching lines are not among the model's results) can fail the entry.
    entry = entries_by_id("multi_turn_base")["multi_turn_base_0"]
    gt = [list(t) for t in entry.answer]
    assert gt[1][1].startswith("grep(")
    dropped = [[t] for t in gt]
    dropped[1] = [gt[1][:1]]
    verdict = check_multi_turn(dropped, entry)
    assert verdict.error_type == "multi_turn:execution_response_mismatch"
    assert "turn 1" in verdict.error[0] and "budget analysis" in verdict.error[1]["missing_items"][0]
    run = MultiTurnRun(entry)  # the same through the env's turn-by-turn runner
    run.step(gt[0])
    assert run.end_turn() is None
    run.step(gt[1][:1])
    assert run.end_turn().error_type == "multi_turn:execution_response_mismatch"


def test_executor_rules():
    s = ApiSession("multi_turn_base_9", ["GorillaFileSystem", "MathAPI"], {}, tag="m")
    out = s.execute(["add(a=1, b=2)", "remove(x=1)", "nope()", "add(a='x', b=1)", "pwd(", "mean(numbers=[1, 2])",
                     "__import__('os')", "add(a=1, b=2).keys()", "absolute_value(number=-3)"])
    assert out[0] == '{"result": 3}'
    assert out[1] == "Error during execution: Function call remove is not allowed."
    assert out[2] == "Error during execution: name 'nope' is not defined"
    assert out[3].startswith("Error during execution:") or out[3].startswith("{")
    assert out[4].startswith("Error during execution: '(' was never closed")
    assert out[5] == '{"result": 1.5}'
    assert out[6] == "Error during execution: name '__import__' is not defined"
    assert out[7].startswith("Error during execution:")
    assert out[8] == '{"result": 3}'
    # names of methods are prefixed even inside string literals, as upstream does
    assert s._rewrite("echo(content='call pwd() now')") == \
        "m_multi_turn_base_9_gorillafilesystem_instance.echo(content='call m_multi_turn_base_9_gorillafilesystem_instance.pwd() now')"
    assert "too large" in s.execute(["power(base=10, exponent=10**8)"])[0]
