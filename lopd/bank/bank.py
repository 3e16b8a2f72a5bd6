"""``ExperienceBank``: experiences + their vectors + one faiss index per env, saved crash-safely.

See the package docstring (``lopd.bank``) for the usage the learners rely on.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np

from envs.trace import Episode

from lopd.bank.config import MACHINE_FIELDS, BankConfig
from lopd.bank.embed import DEFAULT_MODEL_NAME, Embedder, resolve_model
from lopd.bank.experience import Experience, Hit
from lopd.bank.index import ShardIndex
from lopd.bank.ingest import (
    IngestReport,
    SplitError,
    check_split,
    experiences_from_episodes,
    experiences_from_traces,
)
from lopd.bank.store import BankCorruptError, Writer, read_snapshot, write_snapshot

EnvArg = str | Sequence[str | None] | None


class ExperienceBank:
    """Successful training experiences, searchable by task text. Not thread-safe for writes."""

    def __init__(self, config: BankConfig | None = None, embedder: Embedder | None = None):
        self.config = config or BankConfig()
        self._embedder = embedder
        self.experiences: list[Experience] = []
        self.dim: int | None = None
        self._vectors = np.zeros((0, 0), np.float32)
        self._keys: set[str] = set()
        self._shards: dict[str, ShardIndex] = {}
        self._shard_ids: dict[str, list[int]] = defaultdict(list)
        self._by_task: dict[tuple[str, str], list[int]] = defaultdict(list)
        self._by_task_id: dict[str, list[int]] = defaultdict(list)
        self._by_text: dict[str, list[int]] = defaultdict(list)
        self.last_report: IngestReport | None = None
        self.version: str | None = None

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        traces: Iterable[str | os.PathLike],
        config: BankConfig | None = None,
        embedder: Embedder | None = None,
    ) -> ExperienceBank:
        """A new bank from trace files; the ingestion report is in ``bank.last_report``."""
        bank = cls(config, embedder)
        bank.add_traces(traces)
        return bank

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = Embedder.from_config(self.config)
        return self._embedder

    def __len__(self) -> int:
        return len(self.experiences)

    @property
    def vectors(self) -> np.ndarray:
        """(n, dim) unit vectors, row i for ``experiences[i]`` (read-only view)."""
        v = self._vectors.view()
        v.flags.writeable = False
        return v

    def document_text(self, exp: Experience) -> str:
        """The text embedded for an entry: the task, or task plus trajectory (config.embed_text)."""
        return exp.task if self.config.embed_text == "task" else exp.text

    # ---- adding -------------------------------------------------------------------------------
    def add_traces(self, traces: Iterable[str | os.PathLike]) -> IngestReport:
        """Ingest trace files incrementally (no rebuild); returns what was kept and skipped."""
        report = IngestReport()
        exps = list(experiences_from_traces(traces, self.config, report, seen=set(self._keys)))
        self.add_experiences(exps)
        self.last_report = report
        return report

    def add_episodes(self, episodes: Iterable[Episode], label: str = "<memory>") -> IngestReport:
        """Ingest in-memory episodes (e.g. this step's successful rollouts) with the same filters."""
        report = IngestReport()
        exps = list(
            experiences_from_episodes(episodes, self.config, report, seen=set(self._keys), label=label)
        )
        self.add_experiences(exps)
        self.last_report = report
        return report

    def add_experiences(
        self, experiences: Sequence[Experience], vectors: np.ndarray | None = None
    ) -> list[int]:
        """Add rendered experiences (embedding them unless ``vectors`` are given); duplicates of
        entries already present are skipped. Raises :class:`SplitError` for any non-training
        experience, before adding anything. Returns the ids of the added entries."""
        for exp in experiences:
            check_split(exp, self.config)
        if vectors is not None:
            vectors = np.asarray(vectors, dtype=np.float32)
            if vectors.ndim != 2 or len(vectors) != len(experiences):
                raise ValueError(f"vectors must be (len(experiences), dim), got {vectors.shape}")
        keep, seen = [], set()
        for i, exp in enumerate(experiences):
            k = exp.key
            if k not in self._keys and k not in seen:
                seen.add(k)
                keep.append(i)
        if not keep:
            return []
        new = [experiences[i] for i in keep]
        if vectors is None:
            vecs = self.embedder.encode_documents([self.document_text(e) for e in new])
            self._check_dim(vecs.shape[1])
        else:
            vecs = vectors[keep]
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            if not np.all(np.isfinite(vecs)) or np.any(norms == 0):
                raise ValueError("vectors must be finite and non-zero")
            vecs = np.ascontiguousarray(vecs / norms, dtype=np.float32)
        if self.dim is None:
            self.dim, self._vectors = vecs.shape[1], np.zeros((0, vecs.shape[1]), np.float32)
        elif vecs.shape[1] != self.dim:
            raise ValueError(f"vectors are {vecs.shape[1]}-d but the bank is {self.dim}-d")
        start = len(self.experiences)
        ids = list(range(start, start + len(new)))
        self._vectors = np.concatenate([self._vectors, vecs])
        self.experiences.extend(new)
        by_env: dict[str, list[int]] = defaultdict(list)
        for gid, exp in zip(ids, new):
            self._index_meta(gid, exp)
            by_env[exp.env_id].append(gid)
        for env, gids in by_env.items():
            self._shard_ids[env].extend(gids)
            shard = self._shards.setdefault(env, ShardIndex(self.dim, self.config))
            shard.add(self._vectors[gids], all_vectors=self._vectors[self._shard_ids[env]])
        return ids

    def _index_meta(self, gid: int, exp: Experience) -> None:
        self._keys.add(exp.key)
        self._by_task[(exp.env_id, exp.task_id)].append(gid)
        self._by_task_id[exp.task_id].append(gid)
        self._by_text[exp.task.strip()].append(gid)

    def _check_dim(self, dim: int) -> None:
        if self.dim is not None and dim != self.dim:
            raise ValueError(
                f"the embedding model {self.config.model!r} gives {dim}-d vectors but this bank "
                f"holds {self.dim}-d ones; load it with the model it was built with"
            )

    # ---- retrieval ----------------------------------------------------------------------------
    def search(
        self,
        tasks: Sequence[str],
        k: int | None = None,
        *,
        env: EnvArg = None,
        task_ids: Sequence[str | None] | None = None,
        exclude_self: bool | None = None,
    ) -> list[list[Hit]]:
        """Top-``k`` experiences for each task text, best first (one embedding batch, one faiss
        search per env group).

        env: None searches every env; a string filters all queries to that env; a list gives
        each query its own env filter (None entries search every env).
        task_ids: each query's task id, so its own entries can be excluded (matched within the
        query's env when one is given). Entries with the identical task text are excluded too.
        exclude_self: defaults to ``config.exclude_self``.
        """
        if isinstance(tasks, str):
            raise TypeError("search takes a list of task texts; use search_one for a single task")
        if not tasks:
            return []
        if len(self) == 0:
            return [[] for _ in tasks]
        queries = self.embedder.encode_queries(list(tasks))
        self._check_dim(queries.shape[1])
        return self.search_vectors(
            queries, k, env=env, task_ids=task_ids, task_texts=tasks, exclude_self=exclude_self
        )

    def search_one(
        self,
        task: str,
        k: int | None = None,
        *,
        env: str | None = None,
        task_id: str | None = None,
        exclude_self: bool | None = None,
    ) -> list[Hit]:
        """:meth:`search` for a single task."""
        return self.search([task], k, env=env, task_ids=[task_id], exclude_self=exclude_self)[0]

    def search_vectors(
        self,
        queries: np.ndarray,
        k: int | None = None,
        *,
        env: EnvArg = None,
        task_ids: Sequence[str | None] | None = None,
        task_texts: Sequence[str] | None = None,
        exclude_self: bool | None = None,
    ) -> list[list[Hit]]:
        """:meth:`search` with query vectors already computed (unit-normalised by this method)."""
        k = self.config.top_k if k is None else int(k)
        if k < 1:
            raise ValueError("k must be >= 1")
        q = np.array(queries, dtype=np.float32, ndmin=2, order="C")  # a copy: the caller's array stays as is
        if q.ndim != 2 or (self.dim is not None and q.shape[1] != self.dim) or not np.all(np.isfinite(q)):
            raise ValueError(f"queries must be finite (n, {self.dim}) vectors, got shape {q.shape}")
        q /= np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
        nq = len(q)
        envs = _per_query(env, nq, "env")
        tids = _per_query(task_ids, nq, "task_ids")
        texts = _per_query(task_texts, nq, "task_texts")
        exclude_self = self.config.exclude_self if exclude_self is None else exclude_self
        excl = [self._own_ids(envs[i], tids[i], texts[i]) if exclude_self else set() for i in range(nq)]
        found: list[list[tuple[float, int]]] = [[] for _ in range(nq)]
        groups: dict[str | None, list[int]] = defaultdict(list)
        for i, e in enumerate(envs):
            groups[e].append(i)
        for e, qidx in groups.items():
            for shard_env in [e] if e is not None else list(self._shards):
                if shard_env in self._shards:
                    self._search_shard(shard_env, q, qidx, k, excl, found)
        return [
            [
                Hit(gid, score, self.experiences[gid])
                for score, gid in sorted(f, key=lambda t: (-t[0], t[1]))[:k]
            ]
            for f in found
        ]

    def _own_ids(self, env: str | None, task_id: str | None, text: str | None) -> set[int]:
        own: set[int] = set()
        if task_id is not None:
            own.update(
                self._by_task.get((env, str(task_id)), ())
                if env is not None
                else self._by_task_id.get(str(task_id), ())
            )
        if text is not None:
            own.update(self._by_text.get(text.strip(), ()))
        return own

    def _search_shard(
        self,
        env: str,
        q: np.ndarray,
        qidx: list[int],
        k: int,
        excl: list[set[int]],
        found: list[list[tuple[float, int]]],
    ) -> None:
        shard, gids = self._shards[env], self._shard_ids[env]
        n = shard.n
        # Fetch enough to survive exclusion: k plus the most own entries any query has here.
        extra = max((sum(self.experiences[g].env_id == env for g in excl[i]) for i in qidx), default=0)
        kk, pending = min(k + extra, n), qidx
        while pending:
            scores, labels = shard.search(q[pending], kk)
            short = []
            for row, i in enumerate(pending):
                hits = [
                    (float(s), gids[lab])
                    for s, lab in zip(scores[row], labels[row])
                    if lab >= 0 and gids[lab] not in excl[i]
                ]
                if len(hits) < k and kk < n:  # an approximate index came up short: widen and retry
                    short.append(i)
                else:
                    found[i].extend(hits[:k])
            pending, kk = short, min(2 * kk, n)

    # ---- oracle access (OPSD) -----------------------------------------------------------------
    def experiences_for(self, env_id: str, task_id: str) -> list[Experience]:
        """Every stored experience of one task, in insertion order."""
        return [self.experiences[i] for i in self._by_task.get((env_id, str(task_id)), ())]

    def oracle(self, env_id: str, task_id: str) -> Experience | None:
        """The task's own best experience (highest reward, earliest on ties), or None: OPSD's
        oracle trajectory."""
        own = self.experiences_for(env_id, task_id)
        return max(own, key=lambda e: e.reward) if own else None

    # ---- persistence --------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> str:
        """Write a new snapshot of the bank to directory ``path`` atomically; returns its version."""
        exps, vecs = list(self.experiences), self._vectors
        files: dict[str, Writer] = {
            "experiences.jsonl": lambda f: [
                f.write((json.dumps(e.to_dict(), ensure_ascii=False) + "\n").encode("utf-8")) for e in exps
            ],
            "vectors.npy": lambda f: np.save(f, vecs, allow_pickle=False),
        }
        shards = []
        for n, (env, shard) in enumerate(self._shards.items()):
            rel = f"shards/{n}.faiss" if shard.stored else None
            if rel:
                data = shard.to_bytes()
                files[rel] = lambda f, data=data: f.write(data)
            shards.append({"env_id": env, "kind": shard.kind, "entries": shard.n, "file": rel})
        manifest = {
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "entries": len(exps),
            "dim": self.dim,
            "config": self.config.to_dict(),
            "embedder": self._embedder_identity(),
            "shards": shards,
        }
        self.version = write_snapshot(path, files, manifest)
        return self.version

    def _embedder_identity(self) -> dict[str, Any]:
        m = self.config.model
        if self._embedder is not None and not isinstance(self._embedder, Embedder):
            # a caller's own embedder (e.g. the lexical HashingEmbedder): no model is involved, none is looked up
            name = type(self._embedder).__name__
        elif m == "default":
            name = DEFAULT_MODEL_NAME
        else:
            try:
                name = DEFAULT_MODEL_NAME if resolve_model(m) == resolve_model("default") else None
            except FileNotFoundError:  # the default model's package is not installed: m is not it
                name = None
            name = name or os.path.basename(m.rstrip("/"))
        return {"model": m, "name": name, "dim": self.dim, "embed_text": self.config.embed_text}

    @classmethod
    def load(
        cls, path: str | os.PathLike, embedder: Embedder | None = None, **runtime: Any
    ) -> ExperienceBank:
        """Open a saved bank. ``runtime`` may change :data:`lopd.bank.config.RUNTIME_FIELDS` (top_k,
        exclude_self, device, ...); machine fields (device, threads, batch size) start from their
        defaults, not from the saving machine. Raises BankCorruptError for a damaged bank."""
        verify = runtime.get("verify_checksums", True)
        snap, manifest = read_snapshot(path, verify=verify)
        try:
            saved = BankConfig.from_dict(
                {k: v for k, v in manifest["config"].items() if k not in MACHINE_FIELDS}
            )
        except (KeyError, TypeError, ValueError) as e:
            raise BankCorruptError(f"bank snapshot {snap}: bad config in manifest: {e}") from None
        cfg = saved.with_runtime(**runtime)
        bank = cls(cfg, embedder)
        bank.version = snap.name
        try:
            with open(snap / "experiences.jsonl", encoding="utf-8") as f:
                exps = [Experience.from_dict(json.loads(line)) for line in f if line.strip()]
            vecs = np.load(snap / "vectors.npy", allow_pickle=False)
        except (KeyError, TypeError, ValueError, OSError) as e:
            raise BankCorruptError(f"bank snapshot {snap} does not parse: {type(e).__name__}: {e}") from None
        if (
            vecs.dtype != np.float32
            or vecs.ndim != 2
            or len(vecs) != len(exps)
            or len(exps) != manifest.get("entries")
        ):
            raise BankCorruptError(
                f"bank snapshot {snap}: {len(exps)} experiences but vectors {vecs.shape} "
                f"{vecs.dtype}; the bank is corrupt"
            )
        for exp in exps:
            try:
                check_split(exp, cfg)
            except SplitError as e:
                raise BankCorruptError(f"bank snapshot {snap} holds a non-training entry: {e}") from None
        bank.experiences, bank._vectors = exps, np.ascontiguousarray(vecs)
        bank.dim = int(vecs.shape[1]) if len(exps) else manifest.get("dim")
        for gid, exp in enumerate(exps):
            bank._index_meta(gid, exp)
            bank._shard_ids[exp.env_id].append(gid)
        for s in manifest.get("shards", []):
            env, gids = s["env_id"], bank._shard_ids.get(s["env_id"], [])
            data = (snap / s["file"]).read_bytes() if s.get("file") else None
            try:
                bank._shards[env] = ShardIndex.restore(bank.dim, cfg, s["kind"], vecs[gids], data)
            except (RuntimeError, ValueError) as e:
                raise BankCorruptError(
                    f"bank snapshot {snap}: index of env {env!r} is unusable: {e}"
                ) from None
        if set(bank._shards) != set(bank._shard_ids):
            raise BankCorruptError(f"bank snapshot {snap}: shards do not match the experiences' envs")
        return bank

    def stats(self) -> dict[str, Any]:
        """Counts per env, rewards, index kinds and the embedding setup."""
        envs = {}
        for env, gids in self._shard_ids.items():
            rewards = [self.experiences[g].reward for g in gids]
            envs[env] = {
                "entries": len(gids),
                "tasks": len({self.experiences[g].task_id for g in gids}),
                "index": self._shards[env].kind,
                "mean_reward": float(np.mean(rewards)),
            }
        lengths = [len(e.text) for e in self.experiences]
        return {
            "entries": len(self),
            "tasks": len(self._by_task),
            "dim": self.dim,
            "version": self.version,
            "model": self.config.model,
            "embed_text": self.config.embed_text,
            "mean_text_chars": float(np.mean(lengths)) if lengths else 0.0,
            "envs": envs,
        }


def _per_query(value: Any, nq: int, name: str) -> list[Any]:
    if value is None or isinstance(value, str):
        return [value] * nq
    value = list(value)
    if len(value) != nq:
        raise ValueError(f"{name} has {len(value)} entries for {nq} queries")
    return value
