"""One faiss index over unit vectors, searched by inner product (= cosine similarity).

``flat`` is exact (IndexFlatIP, the authors' choice); ``hnsw`` (IndexHNSWFlat) and ``ivf``
(IndexIVFFlat) are approximate for large banks. ``auto`` picks flat below
``cfg.approx_min_entries`` vectors and HNSW at or above, and switches once when adds cross it.

>>> import numpy as np
>>> from lopd.bank.config import BankConfig
>>> v = np.eye(4, dtype=np.float32)
>>> idx = ShardIndex(4, BankConfig())
>>> idx.add(v)
>>> scores, labels = idx.search(np.array([[0.8, 0.6, 0.0, 0.0]], np.float32), 2)
>>> labels[0].tolist(), idx.kind
([0, 1], 'flat')
"""

from __future__ import annotations

import math

import numpy as np

from lopd.bank.config import BankConfig


SMALL_BATCH = 32
"""Batches smaller than this search on one thread unless config.search_threads says otherwise."""


def _faiss():
    import faiss  # heavy-ish; imported when an index is first built

    return faiss


def choose_kind(n: int, cfg: BankConfig) -> str:
    """The index kind for a shard of ``n`` vectors under ``cfg``."""
    if cfg.index != "auto":
        return cfg.index
    return "hnsw" if n >= cfg.approx_min_entries else "flat"


class ShardIndex:
    """A growable faiss index; labels are 0-based insertion positions."""

    def __init__(self, dim: int, cfg: BankConfig, kind: str | None = None):
        self.dim, self.cfg = dim, cfg
        self.kind = kind
        self.index = None

    @property
    def n(self) -> int:
        return 0 if self.index is None else int(self.index.ntotal)

    def _new(self, kind: str, train: np.ndarray):
        faiss = _faiss()
        if kind == "flat":
            return faiss.IndexFlatIP(self.dim)
        if kind == "hnsw":
            index = faiss.IndexHNSWFlat(self.dim, self.cfg.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = self.cfg.hnsw_ef_construction
            return index
        if kind == "ivf":
            n = len(train)
            nlist = self.cfg.ivf_nlist or max(1, int(4 * math.sqrt(n)))
            nlist = max(1, min(nlist, n // 39 or 1))  # faiss wants ~39 points per centroid
            quantizer = faiss.IndexFlatIP(self.dim)
            index = faiss.IndexIVFFlat(quantizer, self.dim, nlist, faiss.METRIC_INNER_PRODUCT)
            index.train(train)
            return index
        raise ValueError(f"unknown index kind {kind!r}")

    def _tune(self) -> None:
        if self.kind == "hnsw":
            self.index.hnsw.efSearch = self.cfg.hnsw_ef_search
        elif self.kind == "ivf":
            self.index.nprobe = self.cfg.ivf_nprobe

    def add(self, vectors: np.ndarray, all_vectors: np.ndarray | None = None) -> None:
        """Append ``vectors``. ``all_vectors`` (this shard's vectors including the new ones) lets
        the index switch kind when ``auto`` crosses the size threshold."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise ValueError(f"expected (n, {self.dim}) vectors, got {vectors.shape}")
        want = choose_kind(self.n + len(vectors), self.cfg)
        if self.index is not None and want != self.kind and self.cfg.index == "auto" and all_vectors is not None:
            self.rebuild(all_vectors, want)
            return
        if self.index is None:
            self.kind = self.kind or want
            self.index = self._new(self.kind, vectors)
            self._tune()
        self.index.add(vectors)

    def rebuild(self, vectors: np.ndarray, kind: str) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.kind, self.index = kind, self._new(kind, vectors)
        self._tune()
        self.index.add(vectors)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, labels), each (nq, k); label -1 where fewer than k were found."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if self.index is None or k <= 0:
            return np.zeros((len(queries), 0), np.float32), np.zeros((len(queries), 0), np.int64)
        threads = self.cfg.search_threads or (1 if len(queries) < SMALL_BATCH else None)
        if threads is None:
            return self.index.search(queries, k)
        faiss = _faiss()
        before = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(threads)
        try:
            return self.index.search(queries, k)
        finally:
            faiss.omp_set_num_threads(before)

    # ---- persistence: flat indexes are rebuilt from the vectors, approximate ones are stored ----
    @property
    def stored(self) -> bool:
        return self.kind in ("hnsw", "ivf")

    def to_bytes(self) -> bytes:
        return _faiss().serialize_index(self.index).tobytes()

    @classmethod
    def restore(cls, dim: int, cfg: BankConfig, kind: str, vectors: np.ndarray, data: bytes | None) -> ShardIndex:
        shard = cls(dim, cfg, kind)
        if kind == "flat" or data is None:
            shard.rebuild(vectors, kind)
            return shard
        shard.index = _faiss().deserialize_index(np.frombuffer(data, dtype=np.uint8))
        if shard.index.d != dim or shard.index.ntotal != len(vectors):
            raise ValueError(f"stored {kind} index holds {shard.index.ntotal} x {shard.index.d}, "
                             f"expected {len(vectors)} x {dim}")
        shard._tune()
        return shard
