"""Record loading in every official shape: JSON list, JSON keyed by id, JSONL, parquet, folders."""

import json
import warnings
from pathlib import Path

import pytest

from envs.envscaler.env import EnvScalerEnv
from envs.envscaler.metrics import summarize
from envs.envscaler.records import RecordError, load_envs, load_scenarios, read_records
from envs.protocol import render_tool_call
from envs.trace import Episode, Step

FIX = Path(__file__).parent / "fixtures"


def jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def solve_task_1(env) -> float:
    env.reset(options={"task_id": "env_tiny-task_1"})
    env.step(render_tool_call("transfer", {"from_id": "A1", "to_id": "B7", "amount": 30}))
    return env.step("Task Completed")[1]


def env_from(envs, scenarios) -> EnvScalerEnv:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = EnvScalerEnv(envs, scenarios, task_ids=["env_tiny-task_1"])
        env.tasks  # noqa: B018
    return env


def test_json_list_and_json_keyed_by_env_id(tmp_path):
    envs = jsonl(FIX / "envs.jsonl")
    (tmp_path / "envs.json").write_text(
        json.dumps({e["env_id"]: {k: v for k, v in e.items() if k != "env_id"} for e in envs}, indent=1)
    )
    (tmp_path / "scenarios.json").write_text(json.dumps(jsonl(FIX / "scenarios.jsonl"), indent=1))
    loaded = load_envs(tmp_path / "envs.json")
    assert (
        sorted(loaded) == ["env_broken", "env_noclass", "env_tiny"]
        and loaded["env_tiny"]["env_id"] == "env_tiny"
    )
    assert solve_task_1(env_from(tmp_path / "envs.json", tmp_path / "scenarios.json")) == 1.0


def test_parquet_with_json_string_fields_like_the_hf_release(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    envs = [
        {
            **e,
            "tools": json.dumps(e["tools"]),
            "constraints_rules": json.dumps(e.get("constraints_rules", [])),
        }
        for e in jsonl(FIX / "envs.jsonl")
    ]
    envs = [
        {
            k: e.get(k)
            for k in (
                "env_id",
                "env_class_name",
                "env_class_code",
                "tools",
                "environment_introduction",
                "constraints_rules",
            )
        }
        for e in envs
    ]
    scen = [
        {
            **s,
            "init_config": json.dumps(s["init_config"]),
            "checklist_with_func": json.dumps(s["checklist_with_func"]),
        }
        for s in jsonl(FIX / "scenarios.jsonl")
    ]
    pq.write_table(pa.Table.from_pylist(envs), tmp_path / "envs.parquet")
    pq.write_table(pa.Table.from_pylist(scen), tmp_path / "scen.parquet")
    assert isinstance(load_envs(tmp_path / "envs.parquet")["env_tiny"]["tools"], list)
    assert isinstance(load_scenarios(tmp_path / "scen.parquet")[0]["init_config"], dict)
    assert solve_task_1(env_from(tmp_path / "envs.parquet", tmp_path / "scen.parquet")) == 1.0


def test_folder_of_files_and_several_paths(tmp_path):
    lines = (FIX / "scenarios.jsonl").read_text().splitlines()
    (tmp_path / "a.jsonl").write_text("\n".join(lines[:2]) + "\n\n")
    (tmp_path / "b.jsonl").write_text("\n".join(lines[2:]) + "\n")
    (tmp_path / "notes.txt").write_text("ignored")
    assert len(load_scenarios(tmp_path)) == len(lines)
    assert (
        len(load_scenarios([tmp_path / "a.jsonl", tmp_path / "a.jsonl"])) == 2
    )  # identical repeats kept once


@pytest.mark.parametrize(
    "content, match",
    [
        ("{not json", "not valid JSON"),
        ('{"task_id": "t", "env_id": "e"}\n', "missing field"),
        ("[1, 2]", "record 0 is a int"),
        ('"text"', "top-level JSON must be"),
    ],
)
def test_bad_files_give_clear_errors(tmp_path, content, match):
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(RecordError, match=match):
        load_scenarios(p)


def test_more_record_errors(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"env_id": "e", "env_class_code": "x = 1", "tools": []}\n{oops\n')
    with pytest.raises(RecordError, match="bad.jsonl:2"):
        load_envs(p)
    p.write_text('{"env_id": "e", "env_class_code": "x = 1", "tools": "{not a list"}\n')
    with pytest.raises(RecordError, match="'tools' is a string but not valid JSON"):
        load_envs(p)
    p.write_text(
        json.dumps({"task_id": "t", "env_id": "e", "task": "x", "init_config": [], "checklist_with_func": []})
        + "\n"
    )
    with pytest.raises(RecordError, match="init_config must be an object"):
        load_scenarios(p)
    s = {"task_id": "t", "env_id": "e", "task": "x", "init_config": {}, "checklist_with_func": []}
    p.write_text(json.dumps(s) + "\n" + json.dumps({**s, "task": "y"}) + "\n")
    with pytest.raises(RecordError, match="appears twice"):
        load_scenarios(p)
    with pytest.raises(RecordError, match="no such file"):
        read_records(tmp_path / "missing.jsonl")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecordError, match="no .json"):
        read_records(tmp_path / "empty")
    p = tmp_path / "x.parquet"
    p.write_text("not parquet")
    with pytest.raises(RecordError, match="not a readable parquet"):
        read_records(p)


def test_summary_metrics():
    eps = [
        Episode("lopd/envscaler-v0", "a", reward=1.0, steps=[Step(0, "x"), Step(1, "y")]),
        Episode("lopd/envscaler-v0", "b", reward=0.25, steps=[Step(0, "x")]),
        {"reward": 0.5, "steps": 6},
    ]
    assert summarize(eps) == {
        "n": 3,
        "mean_reward": pytest.approx(1.75 / 3),
        "full_pass_rate": pytest.approx(1 / 3),
        "mean_steps": 3.0,
    }
    assert summarize([])["n"] == 0
