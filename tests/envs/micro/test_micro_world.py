"""The micro world: determinism, disjoint splits, domains and tools, procedures, partial credit."""

import json
import re
from functools import cache

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401
from envs.envscaler.env import EnvScalerEnv
from envs.envscaler.runtime import load_class
from envs.micro.domains import DOMAINS
from envs.micro.domains.base import FIRST_NAMES, LAST_NAMES
from envs.micro.env import MicroEnv
from envs.micro.expert import run_solver
from envs.micro.world import build_world, cached_world, generate_world, tool_names


@cache
def world_env(tmp: str) -> MicroEnv:
    return MicroEnv(seed=0, n_train=120, n_eval=60, cache_dir=tmp)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return world_env(str(tmp_path_factory.mktemp("cache")))


def test_deterministic_from_the_seed(tmp_path):
    a, b = generate_world(7, 24, 12), generate_world(7, 24, 12)
    assert a == b
    assert generate_world(8, 24, 12)[1] != a[1]
    # task i depends only on (seed, split, i): a bigger world extends a smaller one
    small = generate_world(7, 12, 6)[1]
    assert [s for s in a[1] if s["split"] == "train"][:12] == [s for s in small if s["split"] == "train"]
    f1, f2 = build_world(7, 24, 12, tmp_path / "x"), build_world(7, 24, 12, tmp_path / "y")
    assert (
        f1.scenarios.read_bytes() == f2.scenarios.read_bytes()
        and f1.envs.read_bytes() == f2.envs.read_bytes()
    )
    assert json.loads(f1.manifest.read_text())["seed"] == 7


def _vocab_words() -> set[str]:
    words = set(FIRST_NAMES) | set(LAST_NAMES)
    for d in DOMAINS.values():
        for vocab in d.vocab.values():
            words |= set(vocab)
    return {w.lower() for w in words}


def _strings(x):
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict):
        for v in x.values():
            yield from _strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from _strings(v)


def _entities(record, words) -> set[str]:
    """Vocabulary words among the record's string values (whole values and their name/email parts)."""
    found = set()
    for value in _strings([record["init_config"], record["micro"]["params"]]):
        value = value.lower()
        found |= {value, *re.split(r"[ .@]", value)} & words
    return found


def test_train_and_eval_entities_are_disjoint():
    _, scenarios = generate_world(0, 120, 60)
    words = _vocab_words()
    used = {"train": set(), "eval": set()}
    for s in scenarios:
        used[s["split"]] |= _entities(s, words)
    assert len(used["train"]) > 100 and len(used["eval"]) > 50
    assert used["train"].isdisjoint(used["eval"]), sorted(used["train"] & used["eval"])


def test_six_domains_with_four_to_six_tools_and_distractors():
    envs_, _ = generate_world(0, 6, 0)
    assert len(envs_) == len(DOMAINS) >= 6
    for rec in envs_:
        domain = DOMAINS[rec["env_id"].removeprefix("micro_")]
        names = [t["function"]["name"] for t in rec["tools"]]
        assert 4 <= len(names) <= 6 and names == tool_names(domain.env_class)
        assert domain.distractors and set(domain.distractors) <= set(names)
        cls = load_class(rec["env_id"], rec["env_class_code"], rec["env_class_name"])  # the code stands alone
        assert all(callable(getattr(cls, n)) for n in names)
        assert {o["operation_name"] for o in rec["operation_list"]} == set(names)


def test_expert_scores_one_on_every_task_with_short_dependent_procedures(env):
    for task in env.all_tasks():
        traj = run_solver(env, task.task_id)
        assert traj.reward == 1.0, task.task_id
        domain = DOMAINS[traj.domain]
        assert 2 <= len(traj.calls) <= 5
        assert not {name for name, _, _ in traj.calls} & set(domain.distractors)
        # data dependency: some argument is an id read from an earlier result, absent from the task text
        assert any(
            isinstance(v, str) and v not in task.prompt and any(v in r for _, _, r in traj.calls[:j])
            for j, (_, args, _) in enumerate(traj.calls)
            for v in args.values()
        ), task.task_id


def test_task_text_ends_with_the_values_it_supplies_as_the_calls_write_them(env):
    for task in env.all_tasks():
        prose, values = task.prompt.rsplit("\n", 1)
        assert values.startswith("Values: ") and values.endswith("."), task.task_id
        traj = run_solver(env, task.task_id)
        calls = "".join(json.dumps(args, ensure_ascii=False) for _, args, _ in traj.calls)
        results = "".join(r for _, _, r in traj.calls)
        params = task.data["scenario"]["micro"]["params"].values()
        pairs = values[len("Values: "):-1]
        for pair in re.findall(r'"\w+": (?:"[^"]*"|\d+)', pairs):
            assert pair in calls, (task.task_id, pair)   # written exactly as the call writes it
            value = json.loads("{" + pair + "}")
            assert list(value.values())[0] in params  # from the task, never an id from a result
        assert pairs.count('": ') == len(re.findall(r'"\w+": (?:"[^"]*"|\d+)', pairs)), task.task_id
        assert '"customer": ' in pairs or "micro_shop" not in task.task_id
        assert not any(re.fullmatch(r"[A-Z]+\d+", v) and v in results for v in re.findall(r'"([^"]*)"', pairs))


def test_every_mistake_scores_less_and_partial_credit_exists(env):
    partial = {name: False for name in DOMAINS}
    for task in env.all_tasks()[:60]:
        micro = task.data["scenario"]["micro"]
        for mistake in DOMAINS[micro["domain"]].mistakes[micro["template"]]:
            r = run_solver(env, task.task_id, mistake).reward
            assert 0.0 <= r < 1.0, (task.task_id, mistake)
            partial[micro["domain"]] |= 0.0 < r < 1.0
    assert all(partial.values()), partial


def test_doing_nothing_scores_zero(env):
    for task in env.all_tasks()[:60]:
        env.reset(options={"task_id": task.task_id})
        assert env.step("Task Completed")[1] == 0.0, task.task_id


def test_the_envscaler_env_runs_the_world_unchanged(tmp_path):
    files = build_world(1, 12, 6, tmp_path)
    plain = EnvScalerEnv(files.envs, files.scenarios)
    assert len(plain.tasks) == 18 and {t.split for t in plain.tasks} == {"train", "eval"}
    assert all(run_solver(plain, t.task_id).reward == 1.0 for t in plain.tasks)


def test_registered_env_builds_once_and_passes_check_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LOPD_CACHE_DIR", str(tmp_path))
    env = gym.make("lopd/micro-v0", n_train=30, n_eval=12, split="eval")
    prompt, info = env.reset(seed=0)
    assert info["split"] == "eval" and info["task_id"].startswith("micro_")
    check_env(env.unwrapped, skip_render_check=True)
    files = cached_world(0, 30, 12)
    assert files.root.parent == tmp_path / "micro"
    stamp = files.scenarios.stat().st_mtime_ns
    MicroEnv(n_train=30, n_eval=12).tasks  # noqa: B018  (a second env reuses the cache)
    assert files.scenarios.stat().st_mtime_ns == stamp
    assert len(list((tmp_path / "micro").iterdir())) == 1


def test_validation_tasks_follow_the_test_tasks_and_leave_them_unchanged(tmp_path):
    plain = MicroEnv(seed=0, n_train=12, n_eval=6, cache_dir=tmp_path)
    split = MicroEnv(seed=0, n_train=12, n_eval=6, n_val=4, cache_dir=tmp_path)
    by_split = {s: [t for t in split.all_tasks() if t.split == s] for s in ("train", "eval", "val")}
    assert [len(v) for v in by_split.values()] == [12, 6, 4]
    same = [(t.task_id, t.prompt) for t in plain.all_tasks()]
    assert same == [(t.task_id, t.prompt) for t in split.all_tasks() if t.split != "val"]
    assert [t.task_id.rsplit("_", 1)[1] for t in by_split["val"]] == ["6", "7", "8", "9"]  # eval tasks 6..9
    val_env = MicroEnv(seed=0, n_train=12, n_eval=6, n_val=4, cache_dir=tmp_path, split="val")
    assert val_env.reset(seed=3)[1]["split"] == "val"
    with pytest.raises(ValueError, match="n_val"):
        MicroEnv(n_val=-1)
