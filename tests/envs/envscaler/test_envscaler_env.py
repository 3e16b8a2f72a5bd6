"""EnvScaler episode semantics on our own fixtures (tests/envs/envscaler/fixtures)."""

import warnings
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401  (registers lopd/* ids)
from envs.envscaler.env import INVALID_ACTION, TASK_FINISHED, EnvScalerEnv
from envs.envscaler.parse import PARSE_ACTION_ERROR, PARSE_RESPONSE_ERROR
from envs.envscaler.runtime import EnvClassError
from envs.protocol import render_tool_call

FIX = Path(__file__).parent / "fixtures"


def make(**kw) -> EnvScalerEnv:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # env_absent-task_1 is skipped on purpose
        env = EnvScalerEnv(FIX / "envs.jsonl", FIX / "scenarios.jsonl", **kw)
        env.tasks  # noqa: B018  (load now, under the filter)
    return env


def call(name, **args):
    return render_tool_call(name, args)


def ids_of(env, owner):
    return [a["account_id"] for a in env.instance.find_account(owner)["data"]]


def test_scripted_solution_reads_ids_from_results_and_scores_one():
    env = make()
    prompt, info = env.reset(options={"task_id": "env_tiny-task_1"})
    assert prompt == "Transfer 30 from Ada Park to Bo Chen."
    assert info["env_id"] == "env_tiny"
    assert [t["function"]["name"] for t in info["tools"]][:3] == ["find_account", "deposit", "transfer"]
    system = info["messages"][0]["content"]
    assert (
        system.startswith("You are a helpful assistant.") and "## Brief Introduction:  \nA toy bank" in system
    )
    assert "- Balances are integers.\n" in system and "<tools>" in system
    ids = {}
    for owner in ("Ada Park", "Bo Chen"):
        obs, r, term, trunc, info = env.step(call("find_account", owner=owner))
        assert obs.startswith("<tool_response>\n{'success': True") and obs.endswith("\n</tool_response>")
        assert (r, term, trunc) == (0.0, False, False)
        assert info["messages"][1]["role"] == "tool"
        ids[owner] = eval(info["messages"][1]["content"])["data"][0]["account_id"]  # str(dict) result
    env.step(call("transfer", from_id=ids["Ada Park"], to_id=ids["Bo Chen"], amount=30))
    obs, r, term, trunc, info = env.step("Task Completed")
    assert (obs, r, term, trunc) == (TASK_FINISHED, 1.0, True, False)
    assert [c["result"] for c in info["checks"]] == [True, True, True]
    assert len(env.steps) == 4


def test_only_the_first_call_of_a_response_runs():
    env = make()
    env.reset(options={"task_id": "env_tiny-task_1"})
    text = call("deposit", account_id="B7", amount=5) + "\n" + call("deposit", account_id="A1", amount=5)
    obs, _, _, _, info = env.step(text)
    assert env.instance.accounts["B7"]["balance"] == 25 and env.instance.accounts["A1"]["balance"] == 100
    assert obs.count("<tool_response>") == 1
    assert [c.executed for c in info["step"].calls] == [True, False]  # both blocks recorded


def test_no_call_ends_the_episode_and_scores_the_state():
    env = make()
    env.reset(options={"task_id": "env_tiny-task_1"})
    env.step(call("transfer", from_id="A1", to_id="B7", amount=10))
    _, r, term, trunc, info = env.step("<think>done?</think>I moved some money.")
    assert term and not trunc and r == 0.0  # transfer logged with the wrong amount; balances wrong
    env.reset(options={"task_id": "env_tiny-task_3"})
    env.step(call("deposit", account_id="B7", amount=5))
    _, r, term, _, _ = env.step("Task Completed")
    assert term and r == 0.25


def test_raising_and_malformed_checks_count_zero():
    env = make()
    env.reset(options={"task_id": "env_tiny-task_2"})
    env.step(call("deposit", account_id="B7", amount=5))
    _, r, term, _, info = env.step("Task Completed")
    assert term and r == 0.25
    results = {c["check_item"]: c for c in info["checks"]}
    assert results["Raises"]["result"] is None and "KeyError" in results["Raises"]["error"]
    assert results["Not even Python"]["error"].startswith("SyntaxError")
    assert results["No check_func defined"]["error"] == "Function 'check_func' not found."
    assert results["Bo has 25"]["result"] is True


def test_non_bool_checks_count_zero():
    env = make()
    env.reset(options={"task_id": "env_tiny-task_3"})
    _, r, _, _, info = env.step("Task Completed")
    assert r == 0.0
    assert all(c["result"] is None and "boolean" in c["error"] for c in info["checks"][:3])


def test_empty_checklist_scores_zero_without_crashing():
    env = make()
    env.reset(options={"task_id": "env_tiny-task_4"})
    _, r, term, _, info = env.step("Task Completed")
    assert term and r == 0.0 and info["checks"] == [] and info["verify_error"] is None


def test_checks_see_initial_state_and_share_the_final_state_object():
    env = make()
    env.reset(options={"task_id": "env_tiny-task_5"})
    env.step(call("deposit", account_id="B7", amount=5))
    _, r, _, _, info = env.step("Task Completed")
    # check 1 reads initial_state; check 2 mutates final_state and check 3 sees it (authors' runner)
    assert [c["result"] for c in info["checks"]] == [True, True, True] and r == 1.0


def test_a_tool_that_raises_ends_the_episode_with_reward_zero():
    env = make()
    env.reset(options={"task_id": "env_tiny-task_1"})
    env.step(call("transfer", from_id="A1", to_id="B7", amount=30))  # already a full solution
    obs, r, term, trunc, info = env.step(call("audit"))
    assert term and not trunc and r == 0.0
    assert obs.startswith("Error: <Exception>\n") and "RuntimeError: audit service unavailable" in obs
    assert info["step"].calls[0].executed and "audit service" in info["step"].calls[0].error
    # wrong argument names make the method raise TypeError: same outcome (no schema check)
    env.reset(options={"task_id": "env_tiny-task_1"})
    obs, r, term, _, _ = env.step(call("deposit", account="B7", amount=1))
    assert term and r == 0.0 and "TypeError" in obs


def test_unknown_tool_and_parse_errors_continue():
    env = make()
    env.reset(options={"task_id": "env_tiny-task_1"})
    cases = [
        (call("fly_away"), INVALID_ACTION),
        (call("ghost_tool"), INVALID_ACTION),  # listed in tools but not a method
        ('<tool_call>\n{"name": "deposit", "arguments": {]}\n</tool_call>', PARSE_RESPONSE_ERROR),
        ('<tool_call>\n{"name": "deposit"}\n</tool_call>', PARSE_RESPONSE_ERROR),  # no "arguments"
        ('<tool_call>\n{"name": "deposit", "arguments": "{oops"}\n</tool_call>', PARSE_ACTION_ERROR),
        ('<tool_call>\n{"name": "deposit", "arguments": [1]}\n</tool_call>', INVALID_ACTION),
        ('<tool_call>\n{"name": 7, "arguments": {}}\n</tool_call>', INVALID_ACTION),
        ('<tool_call>\n{"name": "deposit"', PARSE_RESPONSE_ERROR),  # unclosed tag
        ("<think>no end " + call("deposit", account_id="B7", amount=1), PARSE_RESPONSE_ERROR),
        ("", PARSE_ACTION_ERROR),
        ("   \n", PARSE_ACTION_ERROR),
        (b"bytes", PARSE_RESPONSE_ERROR),
        ("x" * 2_000_000, PARSE_RESPONSE_ERROR),
        (call("chat_with_user"), INVALID_ACTION),  # chat_with_user needs "content"
    ]
    for text, expected in cases:
        obs, r, term, trunc, info = env.step(text)
        assert (obs, r, term, trunc) == (expected, 0.0, False, False), text
        assert info["messages"][-1] == {"role": "user", "content": expected}
    assert env.instance.accounts["B7"]["balance"] == 20
    _, r, term, _, _ = env.step(call("chat_with_user", content="Task Completed"))
    assert term and r == 0.0


def test_a_call_block_the_authors_regex_misses_is_chat_with_user():
    # Quirk kept from the authors' parser: a block whose body does not end in '}' is not a call,
    # so the whole response is content -> chat_with_user -> the episode ends and is scored.
    env = make()
    env.reset(options={"task_id": "env_tiny-task_1"})
    obs, r, term, _, _ = env.step('<tool_call>\n{"name": "deposit", "arguments": {</tool_call>')
    assert (obs, r, term) == (TASK_FINISHED, 0.0, True)


def test_unlisted_methods_run_like_the_authors_unless_disabled():
    env = make()
    env.reset(options={"task_id": "env_tiny-task_1"})
    obs, *_ = env.step(call("_close_all"))
    assert obs == "<tool_response>\nclosed\n</tool_response>"
    strict = make(allow_unlisted_methods=False)
    strict.reset(options={"task_id": "env_tiny-task_1"})
    assert strict.step(call("_close_all"))[0] == INVALID_ACTION


def test_max_steps_truncates_with_reward_zero_or_the_state_score():
    for on_trunc, expected in [(False, 0.0), (True, 1.0)]:
        env = make(max_steps=2, reward_on_truncation=on_trunc)
        env.reset(options={"task_id": "env_tiny-task_1"})
        _, _, term, trunc, _ = env.step(call("transfer", from_id="A1", to_id="B7", amount=30))
        assert (term, trunc) == (False, False)
        _, r, term, trunc, info = env.step(call("find_account", owner="Ada Park"))
        assert (term, trunc, r, info["final_reward"]) == (False, True, expected, expected)
        assert env.step("Task Completed")[4] == {"error": "episode_over"}


def test_no_state_leaks_between_episodes():
    env = make()
    for _ in range(3):
        env.reset(options={"task_id": "env_tiny-task_1"})
        env.step(call("deposit", account_id="B7", amount=5))
        obs, *_ = env.step(call("registry_size"))
        assert obs == "<tool_response>\n1\n</tool_response>"  # class attribute is fresh each episode
        assert env.instance.accounts["B7"]["balance"] == 25  # init_config is copied, never mutated
    assert env.task.data["scenario"]["init_config"]["accounts"]["B7"]["balance"] == 20


def test_broken_class_code_names_the_env():
    env = make()
    env.reset(options={"task_id": "env_tiny-task_1"})
    with pytest.raises(EnvClassError, match="env env_broken: env_class_code raised while loading"):
        env.reset(options={"task_id": "env_broken-task_1"})
    assert env.step(call("deposit", account_id="B7", amount=5))[4] == {"error": "episode_over"}
    with pytest.raises(EnvClassError, match="env env_noclass: class 'Nothing' not found"):
        env.reset(options={"task_id": "env_noclass-task_1"})


def test_scenarios_without_an_env_record_are_skipped_loudly():
    with pytest.warns(UserWarning, match="env_absent-task_1"):
        env = EnvScalerEnv(FIX / "envs.jsonl", FIX / "scenarios.jsonl")
        env.tasks  # noqa: B018
    assert "env_absent" in env.skipped["env_absent-task_1"]
    with pytest.raises(KeyError, match="cannot run"):
        env.reset(options={"task_id": "env_absent-task_1"})


def test_task_id_filter_and_check_env():
    env = make(task_ids=["env_tiny-task_1", "env_tiny-task_4"])
    assert [t.task_id for t in env.tasks] == ["env_tiny-task_1", "env_tiny-task_4"]
    check_env(env, skip_render_check=True)
    with pytest.raises(KeyError, match="nope"):
        make(task_ids=["nope"])


def test_gym_make_accepts_record_paths():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gym.make(
            "lopd/envscaler-v0",
            envs=FIX / "envs.jsonl",
            scenarios=FIX / "scenarios.jsonl",
            task_ids=["env_tiny-task_1"],
        )
        prompt, _ = env.reset(seed=3)
    assert prompt == "Transfer 30 from Ada Park to Bo Chen."


def test_system_prompt_options():
    env = make(system=None)
    _, info = env.reset(options={"task_id": "env_tiny-task_1"})
    assert info["messages"][0]["content"].startswith("# Tools\n")
    env = make(system="Be brief.")
    _, info = env.reset(options={"task_id": "env_tiny-task_1"})
    assert info["messages"][0]["content"].startswith("Be brief.\n\n# Tools")


def test_records_load_once(monkeypatch):
    import envs.envscaler.env as env_mod

    calls = []
    real = env_mod.load_envs
    monkeypatch.setattr(env_mod, "load_envs", lambda p: calls.append(p) or real(p))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = EnvScalerEnv(FIX / "envs.jsonl", FIX / "scenarios.jsonl")
        for _ in range(3):
            env.reset(options={"task_id": "env_tiny-task_1"})
    assert len(calls) == 1
