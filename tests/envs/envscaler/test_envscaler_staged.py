"""The staged EnvScaler records ($LOPD_DATA_DIR/envscaler): all load, reset and score."""

import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401
from envs.data import has_data
from envs.envscaler.env import EnvScalerEnv, EnvScalerFixtureEnv
from envs.envscaler.records import load_envs, load_scenarios
from envs.protocol import render_tool_call

pytestmark = [
    pytest.mark.data,
    pytest.mark.skipif(not has_data("envscaler"), reason="EnvScaler data not found; set LOPD_DATA_DIR"),
]


def quiet(cls, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # env_151_rl-task_7: its env is not staged
        env = cls(**kw)
        env.tasks  # noqa: B018
    return env


def test_staged_records_load():
    assert len(load_envs()) == 33
    scenarios = load_scenarios()
    assert len(scenarios) == 89
    assert {"env_151_rl-task_7", "env_183_rl-task_29"} <= {s["task_id"] for s in scenarios}


def test_every_staged_scenario_resets_and_scores_its_initial_state():
    env = quiet(EnvScalerEnv)
    assert len(env.tasks) == 88 and list(env.skipped) == ["env_151_rl-task_7"]
    for task in env.tasks:
        prompt, info = env.reset(options={"task_id": task.task_id})
        assert prompt == task.data["scenario"]["task"] and info["tools"]
        names = {t["function"]["name"] for t in info["tools"]}
        assert all(callable(getattr(env.instance, n)) for n in names)
        _, r, term, _, info = env.step("Task Completed")
        assert (
            term
            and 0.0 <= r <= 1.0
            and len(info["checks"]) == len(task.data["scenario"]["checklist_with_func"])
        )
        assert info["verify_error"] is None


@pytest.mark.parametrize("env_id", ["lopd/envscaler-v0", "lopd/envscaler-fixture-v0"])
def test_check_env(env_id):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(gym.make(env_id).unwrapped, skip_render_check=True)


def test_fixture_scenario_scripted_solution_scores_one():
    # env_183_rl-task_29 has a check that reads the free name `initial_state`.
    env = quiet(EnvScalerFixtureEnv)
    assert [t.task_id for t in env.tasks] == ["env_183_rl-task_29"]
    env.reset(options={"task_id": "env_183_rl-task_29"})
    grief, anx, mind = (
        "ea3f5dbc-2b51-487b-8d44-a1fc1a97ec84",
        "fc9bc53d-b56d-4ca7-9049-7b7b53e80501",
        "c8d02517-bdaf-49d1-b04c-dfcf23c9a41a",
    )
    for name, args in [
        ("join_meeting", {"meeting_id": grief, "participant_id": "P001", "meeting_code": "GRIEF6789"}),
        ("leave_meeting", {"meeting_id": grief, "participant_id": "P005"}),
        ("remove_participant", {"participant_id": "P005"}),
        ("leave_meeting", {"meeting_id": anx, "participant_id": "P004"}),
        ("leave_meeting", {"meeting_id": mind, "participant_id": "P004"}),
    ]:
        obs, r, term, _, _ = env.step(render_tool_call(name, args))
        assert "'success': True" in obs and not term
    _, r, term, _, info = env.step("Task Completed")
    assert term and r == 1.0 and all(c["result"] is True for c in info["checks"])
