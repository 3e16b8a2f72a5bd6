"""A model folder's lopd_defaults.json: the packaged base's settings are what lopd eval and lopd train use
when no flag or key says otherwise, so the base plays its world as it was trained to."""

import json

import pytest

from harness.cli import main
from harness.models import pinned
from harness.models.defaults import DEFAULTS_FILE, ModelDefaults, ModelEnv, read_model_defaults, write_model_defaults
from harness.training.train_config import load_train_config

pytestmark = pytest.mark.usefixtures("one_thread")


def _needs_pinned():
    if pinned.pinned_info() is None:
        pytest.skip(f"no pinned base is shipped ({pinned.PINNED_DIR})")


def test_the_pinned_file_is_what_the_base_recipe_writes():
    from harness.basemodel.build import base_defaults
    from harness.basemodel.config import as_config

    _needs_pinned()
    found, path = read_model_defaults("micro:pinned")
    assert path == pinned.PINNED_DIR / DEFAULTS_FILE
    context = json.loads((pinned.PINNED_DIR / "config.json").read_text())["max_position_embeddings"]
    assert found == base_defaults(as_config(pinned.pinned_info()["config"]), context)
    assert (found.env.kwargs["prompt"], found.max_new_tokens, found.max_turns) == ("compact", 96, 8)
    assert read_model_defaults("tiny:1m") is None


def test_train_takes_the_model_folders_defaults_where_the_config_says_nothing():
    _needs_pinned()
    lines = []
    cfg = load_train_config(None, ["model.path=micro:pinned"], log=lines.append)
    assert (cfg.env.id, cfg.env.kwargs["prompt"], cfg.sampling.max_new_tokens, cfg.rollout.max_turns,
            cfg.rollout.max_context_tokens) == ("lopd/micro-v0", "compact", 96, 8, 8192)
    assert len(lines) == 1 and DEFAULTS_FILE in lines[0] and "rollout.max_turns=8" in lines[0]
    cfg = load_train_config(None, ["model.path=micro:pinned", "sampling.max_new_tokens=50", "env.kwargs.n_train=10"])
    assert (cfg.sampling.max_new_tokens, cfg.env.kwargs) == (50, {"seed": 0, "n_train": 10, "n_eval": 120,
                                                                  "prompt": "compact"})
    cfg = load_train_config(None, ["model.path=micro:pinned", "env.kwargs={prompt: full}"])  # a whole mapping
    assert cfg.env.kwargs == {"prompt": "full"}
    cfg = load_train_config(None, ["model.path=micro:pinned", "env.id=lopd/shop-v0"])  # not its env:
    assert cfg.env.kwargs == {} and cfg.rollout.max_turns == 8  # no world kwargs, still its turn limits
    lines.clear()
    assert load_train_config(None, ["env.id=lopd/shop-v0"], log=lines.append).rollout.max_turns == 30
    assert lines == []


def test_a_folder_of_ones_own_carries_them_too_and_a_bad_file_is_named(tmp_path):
    write_model_defaults(tmp_path, ModelDefaults(ModelEnv("lopd/shop-v0"), max_turns=3))
    found, _ = read_model_defaults(str(tmp_path))
    assert found.max_turns == 3 and found.train_layer() == {"env": {"id": "lopd/shop-v0", "kwargs": {}},
                                                           "rollout": {"max_turns": 3}}
    (tmp_path / DEFAULTS_FILE).write_text('{"max_turns": "many"}')
    with pytest.raises(ValueError, match=f"{DEFAULTS_FILE}.*max_turns"):
        read_model_defaults(str(tmp_path))


@pytest.mark.slow
def test_the_packaged_base_scores_above_zero_with_lopd_evals_defaults(tmp_path, capsys):
    _needs_pinned()
    out = tmp_path / "eval"
    assert main(["eval", "--env", "lopd/micro-v0", "--model", "micro:pinned", "--limit", "8", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"defaults from {pinned.PINNED_DIR / DEFAULTS_FILE}" in err and "--max-turns 8" in err
    run = json.loads((out / "run.json").read_text())
    assert (run["max_new_tokens"], run["max_turns"], run["env_kwargs"]["lopd/micro-v0"]["prompt"]) == (96, 8, "compact")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["envs"]["lopd/micro-v0"]["mean_reward"] > 0
    # an explicit flag wins over the folder's default
    assert main(["eval", "--env", "micro-v0", "--model", "micro:pinned", "--limit", "1", "--max-turns", "2",
                 "--out", str(tmp_path / "flag"), "--quiet"]) == 0
    assert json.loads((tmp_path / "flag" / "run.json").read_text())["max_turns"] == 2
