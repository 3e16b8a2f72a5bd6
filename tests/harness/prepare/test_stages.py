"""The stages' settings that give the authors' bank and cold start (issue #31), and their cache keys."""

from __future__ import annotations

from types import SimpleNamespace

from harness.prepare.stages import StageConfig, _key, bank_config, bank_key


def _base(tmp_path):
    return SimpleNamespace(config=SimpleNamespace(reference_result_chars=60), path=str(tmp_path))


def test_the_bank_takes_the_stage_settings_and_a_chat_template_reads_the_base(tmp_path):
    plain = bank_config(_base(tmp_path), StageConfig())
    assert (plain.observation_chars, plain.min_reward, plain.render, plain.template_tokenizer, plain.embed_text) \
        == (60, 1.0, "lite", None, "task_trajectory")
    authors = bank_config(_base(tmp_path), StageConfig(bank_min_reward=0.0, bank_render="chat_template",
                                                       bank_embed_text="task"))
    assert (authors.min_reward, authors.render, authors.template_tokenizer, authors.embed_text) \
        == (0.0, "chat_template", str(tmp_path), "task")


def test_the_default_bank_key_is_the_one_from_before_and_each_setting_changes_it():
    """Caches built before these settings existed stay valid; any of them set to another value is another bank."""
    cfg, info = StageConfig(), {"key": "base-key"}
    old = _key("bank", "base-key", cfg.bank_tasks, cfg.bank_temperature, cfg.min_bank, cfg.embedder,
               cfg.max_new_tokens, cfg.max_turns)
    assert bank_key(cfg, info) == old
    keys = {bank_key(StageConfig(**kw), info) for kw in
            ({"bank_min_reward": 0.0}, {"bank_render": "chat_template"}, {"bank_embed_text": "task"})}
    assert len(keys) == 3 and old not in keys


def test_a_changed_cold_start_recipe_never_reuses_a_cached_composer(tmp_path):
    """The cold start's cache key covers the composer, its training settings, the framing and the data."""
    from pathlib import Path

    from harness.config import load_config
    from harness.prepare.stages import coldstart_key
    from harness.training.train_config import TrainConfig

    root = Path(__file__).resolve().parents[3]
    cfg, bank, traces = StageConfig(), tmp_path / "bank-abc", [tmp_path / "t.jsonl"]

    def key(*ov):
        return coldstart_key(cfg, load_config(TrainConfig, root / "harness" / "configs" / "lopd.yaml", list(ov)),
                             bank, traces)

    base = key()
    changed = [key(o) for o in ("lopd.composer.qformer.master_weights=false", "lopd.composer.qformer.dtype=bfloat16",
                                "lopd.coldstart.separate_optimizers=true", "lopd.coldstart.qformer_grad_clip=30",
                                "lopd.coldstart.min_reward=0.0", "lopd.framing=authors", "lopd.composer_seed=1",
                                "lopd.allow_self_retrieval=true", "model.dtype=bfloat16")]
    assert base == key("seed=7") and len({base, *changed}) == len(changed) + 1  # the run's seed is not in it
    assert coldstart_key(cfg, load_config(TrainConfig, root / "harness" / "configs" / "lopd.yaml"),
                         tmp_path / "bank-def", traces) != base


def test_the_cold_start_key_does_not_change_with_where_the_cache_is(tmp_path, monkeypatch):
    """A cold start's checkpoint committed on one machine is found on another, under another cache root."""
    from harness.config import load_config
    from harness.prepare.stages import coldstart_key
    from harness.training.train_config import TrainConfig

    def key(root: Path) -> str:
        monkeypatch.setenv("LOPD_CACHE_DIR", str(root))
        bank = root / "demo" / "bank-abc"
        tcfg = load_config(TrainConfig, None, [f"model.path={root / 'base' / 'r14-def'}"])
        return coldstart_key(StageConfig(), tcfg, bank, [bank / "base_traces.jsonl"])

    assert key(tmp_path / "one") == key(tmp_path / "two")
    monkeypatch.setenv("LOPD_CACHE_DIR", str(tmp_path / "one"))
    tcfg = load_config(TrainConfig, None, [f"model.path={tmp_path / 'one' / 'base' / 'r14-def'}"])
    other = tmp_path / "one" / "demo" / "bank-xyz"
    assert coldstart_key(StageConfig(), tcfg, other, [other / "base_traces.jsonl"]) != key(tmp_path / "one")


def test_the_cold_start_key_takes_a_built_base_by_its_recorded_key(tmp_path, built_base):
    """The base's cache folder is named by the code that looks it up; the key holds the weights' own key, so
    unrelated code changes do not retrain a committed cold start (and another base's key does)."""
    from harness.config import load_config
    from harness.prepare.stages import coldstart_key
    from harness.training.train_config import TrainConfig

    def key(folder: str, recorded: str | None) -> str:
        tcfg = load_config(TrainConfig, None, [f"model.path={built_base(folder, recorded)}"])
        return coldstart_key(StageConfig(), tcfg, tmp_path / "bank-abc", [tmp_path / "bank-abc" / "t.jsonl"])

    assert key("1m-aaa", "k1") == key("1m-bbb", "k1") != key("1m-ccc", "k2")
    assert key("plain-1", None) != key("plain-2", None)  # not a built base: its path, as before
