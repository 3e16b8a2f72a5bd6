"""faiss indexes: exact flat, approximate HNSW/IVF recall against exact, auto switching by size."""

from __future__ import annotations

import numpy as np
import pytest

from lopd.bank import BankConfig
from lopd.bank.index import ShardIndex, choose_kind


def clustered(n, dim=64, clusters=50, seed=0, noise=0.35):
    """Unit vectors around shared cluster centres, as real sentence embeddings are (uniform random
    ones are not); ``seed`` draws different points (queries) around the same centres."""
    centers = np.random.default_rng(12345).standard_normal((clusters, dim)).astype(np.float32)
    rng = np.random.default_rng(seed)
    x = centers[rng.integers(clusters, size=n)] + noise * rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def exact_topk(data, queries, k):
    sims = queries @ data.T
    return np.argsort(-sims, axis=1, kind="stable")[:, :k]


def test_flat_is_exact_and_pads_short_results():
    data, queries = clustered(500, seed=1), clustered(20, seed=2)
    idx = ShardIndex(64, BankConfig(index="flat"))
    idx.add(data[:200])
    idx.add(data[200:])
    scores, labels = idx.search(queries, 3)
    assert idx.kind == "flat" and idx.n == 500
    np.testing.assert_array_equal(labels, exact_topk(data, queries, 3))
    np.testing.assert_allclose(scores, np.take_along_axis(queries @ data.T, labels, 1), rtol=1e-5, atol=1e-6)
    small = ShardIndex(64, BankConfig())
    small.add(data[:2])
    _, labels = small.search(queries[:1], 3)
    assert labels[0].tolist()[2] == -1


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_approximate_recall_against_exact(kind):
    data, queries = clustered(2500, seed=3), clustered(200, seed=4)
    idx = ShardIndex(64, BankConfig(index=kind))
    idx.add(data[:2000])
    idx.add(data[2000:])  # incremental add after the first build
    scores, labels = idx.search(queries, 3)
    truth = exact_topk(data, queries, 3)
    recall = np.mean([len(set(a) & set(b)) / 3 for a, b in zip(labels.tolist(), truth.tolist())])
    assert idx.kind == kind and idx.n == 2500 and recall >= 0.95
    np.testing.assert_allclose(scores, np.take_along_axis(queries @ data.T, labels, 1), atol=1e-5)


def test_auto_switches_to_hnsw_when_the_shard_grows():
    cfg = BankConfig(approx_min_entries=300)
    assert (choose_kind(299, cfg), choose_kind(300, cfg), choose_kind(10**6, BankConfig(index="flat"))) == \
        ("flat", "hnsw", "flat")
    data = clustered(400, seed=5)
    idx = ShardIndex(64, cfg)
    idx.add(data[:250], all_vectors=data[:250])
    assert idx.kind == "flat"
    idx.add(data[250:], all_vectors=data)
    assert idx.kind == "hnsw" and idx.n == 400
    _, labels = idx.search(data[:5], 1)
    assert labels[:, 0].tolist() == [0, 1, 2, 3, 4]


def test_bad_vectors_rejected():
    idx = ShardIndex(8, BankConfig())
    with pytest.raises(ValueError, match=r"\(n, 8\)"):
        idx.add(np.zeros((3, 4), np.float32))


def test_small_batches_search_single_threaded_and_restore_the_setting():
    import faiss

    data, queries = clustered(3000, seed=6), clustered(40, seed=7)
    idx = ShardIndex(64, BankConfig(index="flat"))
    idx.add(data)
    before = faiss.omp_get_max_threads()
    one = np.concatenate([idx.search(q[None], 3)[1] for q in queries])   # single queries: 1 thread
    batch = idx.search(queries, 3)[1]                                     # a batch: faiss default
    forced = ShardIndex(64, BankConfig(index="flat", search_threads=2))
    forced.add(data)
    np.testing.assert_array_equal(one, batch)
    np.testing.assert_array_equal(forced.search(queries[:1], 3)[1], batch[:1])
    assert faiss.omp_get_max_threads() == before
