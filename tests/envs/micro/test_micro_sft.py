"""Noisy expert and referenced trajectories: real env observations, configured success rates."""

import random
from collections import defaultdict

import pytest

from envs.envscaler.parse import parse_action
from envs.micro.domains import DOMAINS
from envs.micro.env import MicroEnv
from envs.micro.expert import choose_mistake, expert_success, noisy_expert, run_solver
from envs.micro.sft import DEFAULT_REFERENCE_FRAMING, experience_of, referenced_trajectory, sft_corpus
from envs.protocol import wrap_tool_response


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return MicroEnv(seed=0, n_train=600, n_eval=60, cache_dir=tmp_path_factory.mktemp("cache"))


def test_trajectories_are_hermes_calls_with_real_observations(env):
    traj = run_solver(env, "micro_shop-train-task_0")
    roles = [m["role"] for m in traj.messages]
    assert (
        roles[:2] == ["system", "user"]
        and roles[-1] == "assistant"
        and traj.messages[-1]["content"] == "Task Completed"
    )
    assistant = [m for m in traj.messages if m["role"] == "assistant"]
    tools = [m for m in traj.messages if m["role"] == "tool"]
    assert len(assistant) == len(tools) + 1 == len(traj.calls) + 1
    # replaying the assistant turns through a fresh episode reproduces every observation exactly
    env.reset(options={"task_id": traj.task_id})
    for turn, tool in zip(assistant, tools, strict=False):
        assert parse_action(turn["content"]).error is None
        obs, *_ = env.step(turn["content"])
        assert obs == wrap_tool_response(tool["content"])


def test_noisy_expert_success_rates_follow_the_configuration(env):
    rng = random.Random(0)
    tasks = [t.task_id for t in env.all_tasks() if t.split == "train"]
    rates = defaultdict(list)
    for tid in tasks:
        traj = noisy_expert(env, tid, rng)
        rates[traj.domain].append(traj.reward == 1.0)
        assert (traj.reward == 1.0) == traj.followed_procedure
    configured = expert_success()
    assert len(set(configured.values())) > 1  # it varies by domain
    for domain, hits in rates.items():  # 100 episodes each: within ~3 standard deviations
        assert len(hits) == 100
        assert abs(sum(hits) / len(hits) - configured[domain]) < 0.12, domain
    pooled = sum(sum(h) for h in rates.values()) / 600
    assert abs(pooled - sum(configured.values()) / len(configured)) < 0.05
    high = [noisy_expert(env, tid, rng, {"shop": 0.9}).reward == 1.0 for tid in tasks[::6][:60]]
    assert sum(high) / len(high) > 0.75
    with pytest.raises(KeyError):
        expert_success({"zoo": 0.5})
    with pytest.raises(ValueError):
        expert_success({"shop": 1.5})


def test_the_noisy_choice_matches_each_domains_probability():
    rng = random.Random(0)
    for name, domain in DOMAINS.items():
        for template, mistakes in domain.mistakes.items():
            picks = [choose_mistake({"domain": name, "template": template}, rng) for _ in range(20_000)]
            assert abs(picks.count(None) / len(picks) - domain.expert_success) < 0.015
            assert set(picks) == {None, *mistakes}


def test_referenced_trajectory_uses_another_tasks_procedure(env):
    rng = random.Random(1)
    for tid in ["micro_bank-train-task_1", "micro_files-train-task_4", "micro_travel-eval-task_5"]:
        traj = referenced_trajectory(env, tid, rng)
        ref = env.task_by_id(traj.reference_task_id)
        assert traj.reference_task_id != tid and ref.split == "train"
        mine, theirs = env.task_by_id(tid).data["scenario"]["micro"], ref.data["scenario"]["micro"]
        assert (mine["domain"], mine["template"]) == (theirs["domain"], theirs["template"])
        ref_traj = run_solver(env, traj.reference_task_id)
        assert [c[0] for c in traj.calls] == [c[0] for c in ref_traj.calls]  # the same procedure
        user = traj.messages[1]["content"]
        assert user == DEFAULT_REFERENCE_FRAMING.format(
            reference=experience_of(ref_traj), task=env.task_by_id(tid).prompt
        )
        assert f"Task: {ref.prompt}\n\nTrajectory:\n[1] Action: " in user and traj.reward == 1.0
    with pytest.raises(ValueError, match="another task"):
        referenced_trajectory(
            env, "micro_bank-train-task_1", rng, reference_task_id="micro_bank-train-task_1"
        )


def test_sft_corpus_is_deterministic_and_mixed(env):
    a = sft_corpus(env, n_plain=30, n_referenced=12, seed=3)
    b = sft_corpus(env, n_plain=30, n_referenced=12, seed=3)
    assert a == b
    assert sorted(x["kind"] for x in a).count("referenced") == 12
    assert all(x["messages"][0]["role"] == "system" for x in a)
    assert all(x["reward"] == 1.0 for x in a if x["kind"] == "referenced")
    assert {x["domain"] for x in a} <= set(DOMAINS)
    assert all(env.task_by_id(x["task_id"]).split == "train" for x in a)


@pytest.mark.parametrize("max_chars", [40, 120, 300])
def test_experience_text_is_the_banks_rendering_of_the_same_run(env, max_chars):
    """A base pretrained on these references must be able to read the bank's experiences: one format."""
    from envs.trace import Episode
    from lopd.bank.experience import render_text
    from lopd.bank.render import render_episode

    seen = set()
    for task in env.all_tasks():
        micro = task.data["scenario"]["micro"]
        if task.split != "train" or (micro["domain"], micro["template"]) in seen:
            continue
        seen.add((micro["domain"], micro["template"]))
        traj = run_solver(env, task.task_id)
        ep = Episode(env_id="lopd/micro-v0", task_id=task.task_id, split="train", messages=env.messages,
                     tools=env.tools.schemas, steps=env.steps, reward=env.final_reward, terminated=True)
        bank_task, bank_traj = render_episode(ep, observation_chars=max_chars)
        assert experience_of(traj, max_result_chars=max_chars) == render_text(bank_task, bank_traj)
    assert len(seen) >= 12
