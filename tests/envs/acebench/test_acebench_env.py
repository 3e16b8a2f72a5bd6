"""The Gymnasium environments: registration, check_env, prompts, formats, agent episodes."""

import json

import gymnasium as gym
import pytest
from conftest import needs_data

import envs  # noqa: F401  (registers the ids)
from envs.acebench.data import load_category
from envs.acebench.env import AceBenchAgentEnv, AceBenchNormalEnv
from envs.acebench.ground_truth import EXCEPTIONS_FILE, milestone_lists, normal_output, special_output
from envs.acebench.user_sim import EngineUserSimulator, ScriptedUserSimulator
from envs.protocol import render_tool_calls
from envs.registry import registered_ids

pytestmark = needs_data
IDS = [f"lopd/acebench-{f}-{lang}-v0" for f in ("normal", "special", "agent") for lang in ("en", "zh")]
EXCEPTIONS = json.loads(EXCEPTIONS_FILE.read_text(encoding="utf-8"))


def test_all_ids_are_registered():
    assert set(IDS) <= set(registered_ids())


@pytest.mark.parametrize("env_id", IDS)
def test_check_env(env_id, run_check_env):
    run_check_env(env_id)


def test_every_entry_loads_as_a_task():
    counts = {env_id: len(gym.make(env_id).unwrapped.tasks) for env_id in IDS}
    assert sum(v for k, v in counts.items() if "-en-" in k) == 1023
    assert sum(v for k, v in counts.items() if "-zh-" in k) == 1017


def test_normal_episode_prompt_format():
    env = gym.make("lopd/acebench-normal-en-v0", categories=["normal_single_turn_single_function"]).unwrapped
    prompt, info = env.reset(options={"task_id": "normal_single_turn_single_function_0"})
    assert prompt.startswith("Conversation history 1..t:\nuser: I have been fascinated")
    system = info["messages"][0]["content"]
    assert "[ApiName(key1='value1'" in system and "NightSkyAnalysis_performEclipseAnalysis" in system
    entry = env.entry()
    obs, reward, term, trunc, info = env.step("<think>easy</think>\n" + normal_output(entry.ground_truth))
    assert (reward, term, trunc) == (1.0, True, False)
    assert info["verdict"] == {
        "id": entry.id,
        "category": entry.category,
        "valid": True,
        "error_type": "",
        "error": None,
    }
    assert env.step("again")[4]["error"] == "episode_over"
    env.reset(options={"task_id": "normal_single_turn_single_function_0"})
    _, reward, *_, info = env.step(normal_output(entry.ground_truth).replace("'total'", "'partial'"))
    assert reward == 0.0 and info["verdict"]["error_type"] == "value_error:string"
    env.reset(seed=3)
    assert env.step(12345)[1] == 0.0  # not text: an invalid verdict, no exception


def test_normal_episode_fc_format():
    env = AceBenchNormalEnv("en", categories=["normal_single_turn_parallel_function"], format="fc")
    _, info = env.reset(options={"task_id": "normal_single_turn_parallel_function_0"})
    assert "<tools>" in info["messages"][0]["content"]
    assert len(info["tools"]) == len(env.entry().functions) == 4
    calls = [(k, v) for k, v in env.entry().ground_truth.items()]
    _, reward, *_ = env.step(render_tool_calls(calls))
    assert reward == 1.0
    env.reset(options={"task_id": "normal_single_turn_parallel_function_0"})
    _, reward, *_, info = env.step(render_tool_calls(calls[:1]))
    assert reward == 0.0 and info["verdict"]["error_type"] == "wrong functions number"
    env.reset(options={"task_id": "normal_single_turn_parallel_function_0"})
    _, reward, *_, info = env.step("<tool_call>{broken</tool_call>")
    assert reward == 0.0 and info["verdict"]["error_type"] == "wrong_output_format"


@pytest.mark.parametrize("language", ["en", "zh"])
def test_normal_and_special_envs_replay_ground_truth(language):
    for family in ("normal", "special"):
        env = gym.make(f"lopd/acebench-{family}-{language}-v0").unwrapped
        failed = set()
        for task in env.tasks:
            entry = task.data["entry"]
            gt = entry.ground_truth[0] if isinstance(entry.ground_truth, list) else entry.ground_truth
            env.reset(options={"task_id": task.task_id})
            out = normal_output(gt) if family == "normal" else special_output(entry.category, gt)
            if env.step(out)[1] != 1.0:
                failed.add(task.task_id)
        assert failed == (set(EXCEPTIONS["normal"][language]) if family == "normal" else set())


def run_agent(env, task_id, messages):
    env.reset(options={"task_id": task_id})
    for m in messages:
        obs, reward, term, trunc, info = env.step(m)
        assert not (term or trunc), (task_id, m, obs)
    return env.step("finish conversation")


@pytest.mark.parametrize("language", ["en", "zh"])
def test_agent_env_replays_every_entry_to_reward_one(language):
    """Each agent entry, driven through the env by its mile_stone messages (the corrected sequence
    where the data's own is defective, see ground_truth_exceptions.json), ends with reward 1.0."""
    from envs.acebench.ground_truth import repair_milestone

    env = gym.make(f"lopd/acebench-agent-{language}-v0").unwrapped
    listed = EXCEPTIONS["agent"][language]
    for task in env.tasks:
        entry = task.data["entry"]
        key = entry.id if len(milestone_lists(entry)) == 1 else f"{entry.id}#0"
        stones = listed[key]["corrected_mile_stone"] if key in listed else milestone_lists(entry)[0]
        obs, reward, term, trunc, info = run_agent(
            env, task.task_id, [repair_milestone(s.strip()) for s in stones]
        )
        assert (reward, term, trunc) == (1.0, True, False), (task.task_id, info["verdict"])
        assert info["process_accuracy"] == 1.0 and info["verdict"]["valid"]


def test_agent_multi_step_routing_and_limits():
    env = AceBenchAgentEnv("en", categories=["agent_multi_step"])
    prompt, info = env.reset(options={"task_id": "agent_multi_step_5"})
    assert prompt.startswith("I am Eve") and "finish conversation" in info["messages"][0]["content"]
    # "finish conversation" in the first message does not end the episode (upstream checks index > 1)
    obs, r, term, trunc, info = env.step("finish conversation")
    assert (
        not term
        and obs == "Please do not ask me any questions, use the known conditions to solve the problem"
    )
    obs, *_ = env.step("[get_latest_message_id()]")
    assert "'message_id': 4" in obs and env.process == ["finish conversation", "[get_latest_message_id()]"]
    for _ in range(17):
        obs, r, term, trunc, info = env.step("Which message?")
        assert not term and not trunc
    obs, r, term, trunc, info = env.step("Which message?")  # the 40th message
    assert trunc and not term and r == 0.0 and info["verdict"]["error_type"]


def test_agent_multi_turn_with_a_scripted_user():
    user = ScriptedUserSimulator(
        [
            "Send 'Are you free tomorrow to have lunch with me?' to Frank.",
            "I am Grace.",
            "Delete the oldest one.",
        ]
    )
    env = AceBenchAgentEnv("en", categories=["agent_multi_turn"], user_simulator=user)
    prompt, info = env.reset(options={"task_id": "agent_multi_turn_0"})
    assert prompt.startswith("Send 'Are you free") and info["messages"][1]["content"] == prompt
    assert "phone assistant" in info["messages"][0]["content"]
    obs, r, term, trunc, info = env.step("Who is sending it?")
    assert obs == "I am Grace." and info["messages"][-1] == {"role": "user", "content": "I am Grace."}
    script = [
        "[turn_on_wifi()]",
        "[get_earliest_message_id()]",
        "[delete_message(message_id=3)]",
        "[send_message(sender_name='Grace', receiver_name='Frank', message='Are you free tomorrow to have "
        "lunch with me?')]",
    ]
    for s in script:
        obs, r, term, trunc, info = env.step(s)
        assert info["messages"][-1]["role"] == "tool" and not term
    obs, r, term, trunc, info = env.step("Done! Anything else?")  # to the user, who finishes after the script
    assert obs == "Delete the oldest one." and not term
    obs, r, term, trunc, info = env.step("Already done.")
    assert obs == "finish conversation" and term and r == 1.0 and info["process_accuracy"] == 1.0
    assert env.process == script


def test_agent_multi_turn_with_an_engine_backed_user():
    seen = []

    def generate(messages):
        seen.append(messages)
        return "I want to book a flight." if len(messages) == 2 else "finish conversation"

    env = gym.make(
        "lopd/acebench-agent-en-v0", categories=["agent_multi_turn"], user_generate=generate
    ).unwrapped
    prompt, _ = env.reset(options={"task_id": "agent_multi_turn_20"})
    assert prompt == "I want to book a flight."
    assert seen[0][0]["role"] == "system" and "Instruction: You are Frank" in seen[0][0]["content"]
    assert "round trip" in seen[0][0]["content"]
    assert seen[0][1] == {"role": "user", "content": "Is there anything you need help with today?"}
    obs, r, term, trunc, info = env.step("From where?")
    assert seen[-1][-1] == {"role": "user", "content": "From where?"} and seen[-1][-2]["role"] == "assistant"
    assert obs == "finish conversation" and not term  # message index 1: upstream only stops after index 1
    obs, r, term, trunc, info = env.step("Anything else?")
    assert term and obs == "finish conversation" and r == 0.0  # nothing was booked


def test_agent_fc_format_and_a_failing_user():
    def broken(_messages):
        raise RuntimeError("engine down")

    env = AceBenchAgentEnv(
        "en",
        categories=["agent_multi_turn"],
        format="fc",
        user_simulator=lambda entry: ScriptedUserSimulator(["hi"]),
    )
    _, info = env.reset(options={"task_id": "agent_multi_turn_0"})
    assert "<tools>" in info["messages"][0]["content"]
    obs, *_ = env.step(render_tool_calls([("turn_on_wifi", {})]))
    assert "Wi-Fi is now on" in obs and env.process == ["[turn_on_wifi()]"]
    env2 = AceBenchAgentEnv("en", categories=["agent_multi_turn"], user_simulator=EngineUserSimulator(broken))
    with pytest.raises(RuntimeError):
        env2.reset(options={"task_id": "agent_multi_turn_0"})
    flaky = ScriptedUserSimulator(["hi"])
    env3 = AceBenchAgentEnv("en", categories=["agent_multi_turn"], user_simulator=flaky)
    env3.reset(options={"task_id": "agent_multi_turn_0"})
    flaky.respond = broken
    obs, r, term, trunc, info = env3.step("Hello?")
    assert trunc and "engine down" in info["error"]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        AceBenchNormalEnv("fr")
    with pytest.raises(ValueError):
        AceBenchNormalEnv("en", format="json")
    with pytest.raises(ValueError):
        AceBenchNormalEnv("en", categories=["agent_multi_turn"]).reset(seed=0)
    with pytest.raises(ValueError):
        AceBenchAgentEnv("en", user_simulator=ScriptedUserSimulator(), user_generate=lambda m: "")


def test_entries_can_be_given_directly():
    entries = list(load_category("en", "special_irrelevant"))[:2]
    env = gym.make("lopd/acebench-special-en-v0", entries=entries).unwrapped
    assert [t.task_id for t in env.tasks] == ["special_irrelevant_0", "special_irrelevant_1"]
