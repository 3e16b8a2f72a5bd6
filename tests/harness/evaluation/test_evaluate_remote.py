"""``lopd eval --env-url ID=URL``: a served env evaluates exactly like the same env in-process."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "envs" / "serving"))
from served_env import served  # noqa: E402

from envs.trace import read_traces  # noqa: E402
from harness.cli.eval import parse_env_urls  # noqa: E402
from harness.engines import HFEngine  # noqa: E402
from harness.evaluation.evaluate import EvalRunConfig, run_eval  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _episodes(out):
    return sorted([(e.env_id, e.task_id, e.seed, e.messages, e.tools, e.reward, e.prompt_token_ids,
             [(s.token_ids, s.observation, s.observation_token_ids, s.reward) for s in e.steps])
            for e in read_traces(out / "traces.jsonl")], key=lambda x: (x[1], x[2]))  # written as they finish


def test_a_served_env_evaluates_like_the_in_process_one(model_dir, tmp_path):
    engine = HFEngine.from_pretrained(model_dir)
    base = {"envs": ["lopd/shop-v0"], "model": model_dir, "n_samples": 2, "max_new_tokens": 24, "max_turns": 3,
            "temperature": 1.0, "top_p": 1.0, "top_k": -1}
    with served("lopd/shop-v0") as url:
        remote = run_eval(EvalRunConfig(**base, out=str(tmp_path / "remote"),
                                        env_urls=parse_env_urls([f"lopd/shop-v0={url}"])),
                          engine, engine.tokenizer, log=lambda s: None)
    local = run_eval(EvalRunConfig(**base, out=str(tmp_path / "local")), engine, engine.tokenizer, log=lambda s: None)
    assert (remote.ran, remote.failed) == (local.ran, local.failed) == (4, [])
    assert _episodes(tmp_path / "remote") == _episodes(tmp_path / "local")


def test_a_bad_env_url_is_named():
    with pytest.raises(ValueError, match="ID=URL"):
        parse_env_urls(["http://127.0.0.1:8000"])
