"""An env served by ``lopd serve`` trains exactly like the same env in-process (``env.url``), and the
trainer's checks of a served env's config."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "envs" / "serving"))
sys.path.insert(0, str(Path(__file__).parents[1] / "learners"))
from learner_fixtures import SUBPROCESS_ENV, small_overrides  # noqa: E402
from served_env import served  # noqa: E402

from envs.trace import read_traces  # noqa: E402
from harness.metrics import read_metrics  # noqa: E402


@pytest.fixture(scope="module")
def shop_url():
    with served("lopd/shop-v0") as url:
        yield url


def _train(run: Path, *extra: str) -> None:
    cmd = [sys.executable, "-m", "harness.training.trainer",
           *small_overrides(run, "grpo", None, "generations=8", "eval.every_generations=4", "seed=3", *extra)]
    done = subprocess.run(cmd, env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]


def _metrics(run: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in read_metrics(run / "metrics.jsonl")]


def _episodes(run: Path) -> list[tuple]:
    return [(e.env_id, e.task_id, e.seed, e.messages, e.reward, e.prompt_token_ids,
             [(s.token_ids, s.observation, s.observation_token_ids, s.reward) for s in e.steps])
            for e in read_traces(run / "traces.jsonl")]


@pytest.mark.slow
def test_two_grpo_steps_on_a_served_env_equal_the_in_process_run(tmp_path, shop_url):
    local, remote = tmp_path / "local", tmp_path / "remote"
    _train(local)
    _train(remote, f"env.url={shop_url}")
    a, b = _metrics(local), _metrics(remote)
    assert len([r for r in a if "train/loss" in r]) == 2 and any("eval/reward" in str(r) for r in a)
    assert a == b  # the same process, seeds and tokens: the same numbers, to the bit
    ea, eb = _episodes(local), _episodes(remote)
    assert len(ea) == len(eb) >= 8 and ea == eb  # env_id lopd/shop-v0 in both: the served env names itself


def test_a_served_env_must_be_the_configured_one(shop_url):
    from harness.env_source import open_env
    from harness.training.train_config import EnvConfig

    with pytest.raises(ValueError, match=r"serves 'lopd/shop-v0', but env.id is 'lopd/micro-v0'"):
        open_env(EnvConfig(id="lopd/micro-v0", url=shop_url))
    with pytest.raises(ValueError, match=r"give them to `lopd serve lopd/shop-v0 key=value"):
        open_env(EnvConfig(id="lopd/shop-v0", url=shop_url, kwargs={"max_steps": 3}))
    env_id, env = open_env(EnvConfig(id="lopd/shop-v0", url=shop_url))
    try:
        assert env_id == "lopd/shop-v0"
        from envs.registry import make

        assert env.unwrapped.all_tasks() == make("lopd/shop-v0").unwrapped.all_tasks()  # in the env's order
    finally:
        env.close()


def test_a_server_that_is_not_there_is_a_clear_error():
    import gymnasium as gym

    import envs  # noqa: F401
    from served_env import free_port

    env = gym.make("lopd/remote-v0", url=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ConnectionError, match="lopd/remote-v0: cannot connect to ws://127.0.0.1"):
        env.reset(seed=0)
    with pytest.raises(ValueError, match="url must be http"):
        gym.make("lopd/remote-v0", url="envhost:8000")
