"""The micro world's base model: corpus, tokenizer, cache, and (slow) a reduced base rolled out."""

import json
import math
import random
import re

import pytest
import torch

import harness.basemodel.corpus as bc
import harness.basemodel.build as bm
from envs.micro.expert import run_solver
from harness.basemodel.config import BasePretrainConfig
from envs.micro.world import all_vocab
from harness.basemodel.corpus import build_base_tokenizer, encode_corpus, tokenizer_texts
from harness.basemodel.build import base_dir, build_corpus, config_key, load_or_build_base
from harness.basemodel.config import BaseModelConfig, make_env
from harness.basemodel.references import frame_reference, good_reference, reference_framing
from harness.models.tokenizer import CONTROL_TOKENS, MARKUP_TOKENS
from harness.basemodel.pretrain import PretrainConfig
from lopd.latent import DEFAULT_FRAMING, LATENT_SENTINEL, frame_user_message


def small_config(**kw) -> BaseModelConfig:
    """A base small enough to build in seconds (the real one: BaseModelConfig())."""
    base = dict(n_train=60, n_eval=12, n_plain=16, n_referenced=8, vocab_size=400, n_copy_drills=16, mixed_drills=0,
                pretrain=PretrainConfig(epochs=1, batch_tokens=4096, warmup_steps=1, progress=False))
    base.update(kw)
    return BaseModelConfig(**base)


@pytest.fixture(scope="module")
def world(tmp_path_factory, monkeypatch_module):
    monkeypatch_module.setenv("LOPD_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    cfg = small_config()
    env = make_env(cfg)
    return cfg, env, build_corpus(env, cfg)


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_a_pretrain_override_keeps_the_base_defaults():
    from harness.config import load_config

    cfg = load_config(BaseModelConfig, None, ["pretrain.epochs=3", "n_plain=10"])
    assert cfg.pretrain.epochs == 3 and cfg.n_plain == 10
    assert cfg.pretrain.batch_tokens == 1024 and cfg.pretrain.context_weight == 0.3
    assert isinstance(cfg.pretrain, BasePretrainConfig) and isinstance(cfg.pretrain, PretrainConfig)


def test_reference_framing_is_lopd_latent_framing_with_text_in_place_of_the_latents():
    f = reference_framing()
    assert f == DEFAULT_FRAMING.replace("{latents}", "{reference}")
    assert frame_reference("Buy a kite.", "REF") == frame_user_message("Buy a kite.").replace(LATENT_SENTINEL, "REF")


def test_corpus_has_both_kinds_and_is_deterministic(world):
    cfg, env, corpus = world
    kinds = [x["kind"] for x in corpus]
    assert kinds.count("plain") == cfg.n_plain and kinds.count("referenced") == cfg.n_referenced
    assert corpus == build_corpus(env, cfg)
    head = reference_framing().split("{reference}")[0]
    for x in corpus:
        msgs = x["messages"]
        assert [m["role"] for m in msgs[:3]] == ["system", "user", "assistant"]
        assert x["task_id"].startswith("micro_") and "-train-" in x["task_id"]
        if x["kind"] == "referenced":
            # a successful other train task of the same procedure, then the right procedure on the target
            assert x["reward"] == 1.0 and x["mistake"] is None
            assert x["reference_task_id"] != x["task_id"] and "-train-" in x["reference_task_id"]
            assert msgs[1]["content"].startswith(head) and "\n\nTrajectory:\n[1] Action: " in msgs[1]["content"]
        else:
            assert not msgs[1]["content"].startswith(head)
    # the noisy expert errs in some plain transcripts
    assert any(x["mistake"] for x in corpus if x["kind"] == "plain")


def test_renamed_transcripts_replace_every_entity_consistently(world):
    cfg, env, corpus = world
    pat = bc._entry_pattern()
    renamed = [x for x in corpus if x["renamed"]]
    assert 0 < len(renamed) < len(corpus)  # rename_fraction=0.8 of 24
    for x in renamed:
        text = "\n".join(m["content"] for m in x["messages"][1:])
        assert not pat.search(text), pat.search(text)
    # the same original entity gets the same new name everywhere in one transcript
    traj = run_solver(env, "micro_files-train-task_4")
    msgs = bc.rename_entities(traj.messages, random.Random(3))
    user, call = msgs[1]["content"], msgs[2]["content"]
    folder = re.search(r"'([a-z ]+)' folder", user).group(1)
    assert folder not in {w for ws in all_vocab().values() for w in ws}
    assert f'"folder": "{folder}"' in call
    assert [m["role"] for m in msgs] == [m["role"] for m in traj.messages]
    assert bc.rename_entities(traj.messages, random.Random(3)) == msgs


def test_rename_pool_fresh_draws_new_words_outside_the_world_and_the_pool(world):
    _, env, _ = world
    corpus = build_corpus(env, small_config(rename_pool="fresh", rename_fraction=1.0))
    assert corpus == build_corpus(env, small_config(rename_pool="fresh", rename_fraction=1.0))
    pat, pool = bc._entry_pattern(), set(bc.name_pool())
    names = set()
    for x in corpus:
        values = re.findall(r'"(?:owner|customer|person|member|traveler)": "([^"]+)"', x["messages"][1]["content"])
        names.update(w.lower() for v in values for w in v.split())
        assert not pat.search("\n".join(m["content"] for m in x["messages"][1:]))
    assert len(names) > 10 and not names & pool  # new words, not the fixed pool
    drills = bc.copy_drills(200, seed=0, keys=("owner", "title"), fresh=True)
    assert drills == bc.copy_drills(200, seed=0, keys=("owner", "title"), fresh=True)
    words = {w.lower() for m in drills for w in re.findall(r"[A-Za-z]{3,}", m[1]["content"])}
    assert len(words - pool) > 300 and not any(pat.fullmatch(w) for w in words - {"give", "owner", "title"})
    rng = random.Random(0)
    fresh = [bc.fresh_word(rng) for _ in range(2000)]
    assert all(3 <= len(w) <= 8 and w.isalpha() for w in fresh) and len(set(fresh)) > 1500


def test_unknown_rename_pools_and_tokenizers_are_errors(world):
    _, env, _ = world
    for pool in ("names", "world"):
        with pytest.raises(ValueError, match="rename_pool"):
            build_corpus(env, small_config(rename_pool=pool))
    for tokenizer in ("chars", "words"):
        with pytest.raises(ValueError, match="tokenizer"):
            bm.build_base(small_config(tokenizer=tokenizer), "/nonexistent")


def test_copy_drills_repeat_random_names_and_ids():
    drills = bc.copy_drills(50, seed=1)
    assert drills == bc.copy_drills(50, seed=1) and drills != bc.copy_drills(50, seed=2)
    pat = bc._entry_pattern()
    for m in drills:
        assert [x["role"] for x in m] == ["system", "user", "assistant"] and m[1]["content"] == m[2]["content"]
        assert not pat.search(m[1]["content"])  # never a world name: no eval entity leaks in
    assert any(re.search(r"[A-Z]\d{3}", m[1]["content"]) for m in drills)


def test_new_model_uses_the_configured_rope_base(world):
    _, _, corpus = world
    tok = build_base_tokenizer(corpus, 400)
    model = bm.new_model(small_config(rope_theta=500.0), tok)
    assert model.config.rope_parameters["rope_theta"] == 500.0
    assert model.config.vocab_size >= len(tok)


def test_tokenizer_keeps_special_tokens_and_splits_entities_and_digits(world):
    _, _, corpus = world
    texts = tokenizer_texts(corpus)
    assert not any(ch.isdigit() for t in texts for ch in t)
    assert all(w not in " ".join(texts) for w in ("Ada", "Chen", "kettle"))  # entity names removed
    tok = build_base_tokenizer(corpus, 400)
    vocab = tok.get_vocab()
    assert all(t in vocab for t in CONTROL_TOKENS + MARKUP_TOKENS)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>" and tok.chat_template
    assert all(len(tok.tokenize(d)) == 1 for d in "0123456789")
    assert tok.tokenize("C943")[-3:] == ["9", "4", "3"]
    text = "Xia Quist wants 2 tea set; id C943."
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    ex = encode_corpus(tok, corpus[:4])
    assert all(0 < e.n_supervised < len(e) for e in ex)


def test_key_tokens_put_a_value_after_the_same_token_in_the_task_text_and_the_call(world):
    _, env, corpus = world
    keys = bc.corpus_keys(corpus)
    assert {"owner", "customer", "account_id", "reason"} <= set(keys)
    tok = build_base_tokenizer(corpus, 400, keys=keys)

    def pieces(text: str) -> list[str]:
        return [tok.decode([i]) for i in tok.encode(text, add_special_tokens=False)]

    def value_after(p: list[str], key: str, value: str) -> list[str]:
        """The pieces after the key token that spell ``value``."""
        i = j = p.index(key) + 1
        while "".join(p[i:j]) != value:
            assert len("".join(p[i:j])) < len(value), p[i:j]
            j += 1
        return p[i:j]

    traj = run_solver(env, "micro_bank-train-task_1")  # freeze: lookup_accounts(owner) first
    task, call = pieces(traj.messages[1]["content"]), pieces(traj.messages[2]["content"])
    owner = traj.calls[0][1]["owner"]
    # the name follows the same key token as the same pieces: copying starts with one induction step
    assert value_after(task, '"owner": "', owner) == value_after(call, '"owner": "', owner)
    result = pieces(traj.messages[3]["content"])
    assert "'account_id': '" in result and '"amount": ' in pieces('{"amount": 120}')
    assert tok.decode(tok.encode(traj.messages[3]["content"], add_special_tokens=False)) == traj.messages[3]["content"]


def test_recall_drills_answer_the_asked_keys_with_the_given_values():
    keys = ("owner", "reason", "account_id", "title")
    drills = bc.copy_drills(40, seed=3, keys=keys)
    assert drills == bc.copy_drills(40, seed=3, keys=keys)
    recall = [m for m in drills if m[0]["content"] == bc.RECALL_DRILL_SYSTEM]
    assert len(recall) == 20
    for m in recall:
        given = m[1]["content"].split("\n")[0]
        asked = json.loads(m[2]["content"])
        pairs = json.loads(given) if given.startswith('{"') else __import__("ast").literal_eval(given)
        assert asked and all(pairs[k] == v for k, v in asked.items())
        assert m[1]["content"].endswith(f"Give {', '.join(asked)}.")


def test_good_reference_is_a_successful_other_train_task_of_the_same_procedure(world):
    cfg, env, _ = world
    full = make_env(cfg, split=None)
    tid = "micro_bank-eval-task_1"
    ref_id, text = good_reference(full, tid)
    a = full.task_by_id(tid).data["scenario"]["micro"]
    b = full.task_by_id(ref_id).data["scenario"]["micro"]
    assert "-train-" in ref_id and (a["domain"], a["template"]) == (b["domain"], b["template"])
    assert text.startswith("Task: ") and text.endswith("Response: Task Completed\n[3] Observation: Task finished")
    assert good_reference(full, tid) == (ref_id, text)


def test_cache_hit_loads_the_same_weights_without_training(world, tmp_path, monkeypatch):
    cfg = small_config(n_plain=6, n_referenced=3)
    m1, t1, info1 = load_or_build_base(cfg, cache_dir=tmp_path, progress=False)
    assert not info1["cached"] and info1["corpus"]["kinds"] == {"plain": 6, "referenced": 3}
    assert info1["path"] == str(base_dir(cfg, tmp_path))
    assert info1["copy_drills"]["steps"] >= 1 and info1["pretrain"]["steps"] >= 1

    def no_training(*a, **k):
        raise AssertionError("a cache hit must not pretrain again")

    monkeypatch.setattr(bm, "pretrain", no_training)
    monkeypatch.setattr(bm, "build_corpus", no_training)
    m2, t2, info2 = load_or_build_base(cfg, cache_dir=tmp_path, progress=False)
    assert info2["cached"] and info2["key"] == info1["key"]
    s1, s2 = m1.state_dict(), m2.state_dict()
    assert s1.keys() == s2.keys() and all(torch.equal(s1[k], s2[k]) for k in s1)
    assert t1.get_vocab() == t2.get_vocab()
    # another config is another build
    assert config_key(small_config(n_plain=7, n_referenced=3)) != config_key(cfg)
    # progress and threads do not change what is built
    assert config_key(small_config(n_plain=6, n_referenced=3, pretrain=PretrainConfig(
        epochs=1, batch_tokens=4096, warmup_steps=1, progress=True, threads=2))) == config_key(cfg)


@pytest.mark.slow
def test_reduced_base_rolls_out_with_finite_rewards(tmp_path, capsys):
    from harness.cli import main

    out = tmp_path / "scores.json"
    args = ["pretrain", "n_train=60", "n_eval=12", "n_plain=60", "n_referenced=30", "vocab_size=400",
            "n_copy_drills=100", "mixed_drills=0", "pretrain.epochs=1", "pretrain.batch_tokens=2048", "pretrain.warmup_steps=5",
            "pretrain.progress=false", "--cache-dir", str(tmp_path), "--eval-tasks", "12", "--json", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "mean reward without context" in printed and "with a good reference" in printed
    res = json.loads(out.read_text())
    assert not res["base"]["cached"]
    assert res["base"]["pretrain"]["loss_last"] < res["base"]["pretrain"]["loss_first"]
    scores = res["eval"]
    assert scores["tasks"] == 12 and scores["episodes"] == {"no_context": 12, "with_reference": 12}
    for cond in ("no_context", "with_reference"):
        assert math.isfinite(scores[cond]) and 0.0 <= scores[cond] <= 1.0
        assert set(scores["per_domain"][cond]) == {"shop", "bank", "library", "calendar", "files", "travel"}
    assert main(args[:-2] + ["--no-eval"]) == 0  # the second call loads the cache
    assert "loaded from the cache" in capsys.readouterr().out
    # a built folder is measured as it is, with its recorded config
    again = tmp_path / "again.json"
    assert main(["pretrain", "--base", res["base"]["path"], "--eval-tasks", "3", "--json", str(again)]) == 0
    assert json.loads(again.read_text())["eval"]["tasks"] == 3
    capsys.readouterr()
    assert main(["pretrain", "--base", res["base"]["path"], "n_plain=3"]) == 2
    assert "as it is" in capsys.readouterr().err
