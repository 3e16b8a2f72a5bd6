"""Privileged-context providers: the experience bank (LOPD, OPSD), oracles (OPSD), siblings (SDPO).

The bank is loaded from a saved directory and/or built from trace files
(:class:`BankSpec`); checkpoints save it, so a bank that grows during training resumes as it
was. Retrieval embeddings come from the bank's sentence-transformers model, or from
:class:`HashingEmbedder`, a lexical embedder with no model to load (for CPU smoke runs)::

    bank = load_bank(cfg.bank)                          # ExperienceBank
    hits = bank.search(["Buy 2 apples."], k=3, env="lopd/shop-v0", task_ids=["apples"])
    exp = bank.oracle(env_id, task.task_id)              # OPSD: the task's own solved trajectory
    text = reference_text(env, task)                    # OPSD: or the dataset's reference solution
    text = episode_text(sibling.traj.episode)           # SDPO: a successful sibling, rendered
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from lopd.bank import BankConfig, ExperienceBank
from lopd.bank.experience import render_text
from lopd.bank.render import render_episode


@dataclass
class BankSpec:
    """Where the experience bank comes from and how it is searched."""

    path: str | None = None
    """A saved bank directory (``lopd bank build``); None starts from an empty bank."""
    traces: list[str] = field(default_factory=list)
    """Trace files (envs.trace JSONL) whose successful training episodes are added at start."""
    embedder: Literal["model", "hashing"] = "model"
    """``model``: the bank's sentence-transformers model (BankConfig.model, MiniLM by default);
    ``hashing``: :class:`HashingEmbedder` (lexical, no model; for tests and CPU smoke runs)."""
    grow: bool = False
    """Add each step's successful training rollouts to the bank (the paper builds it once)."""
    config: BankConfig = field(default_factory=BankConfig)
    """Ingestion, rendering and index settings for a bank built here (a loaded bank keeps its own)."""


class HashingEmbedder:
    """Unit vectors of hashed word and character-trigram counts (a lexical retriever, no model).

    >>> e = HashingEmbedder(dim=64)
    >>> v = e.encode_queries(["buy two apples", "buy 2 apples", "reset a password"])
    >>> bool(v[0] @ v[1] > v[0] @ v[2])
    True
    """

    def __init__(self, dim: int = 512):
        self.dim = dim

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, np.float32)
        low = text.lower()
        feats = re.findall(r"\w+", low) + [low[i:i + 3] for i in range(max(0, len(low) - 2))]
        for f in feats:
            h = int.from_bytes(hashlib.blake2b(f.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")
            v[h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
        n = float(np.linalg.norm(v))
        if n == 0:
            v[0] = 1.0  # an empty text still gets a valid unit vector
            return v
        return v / n

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("pass a list of texts, not a single string")
        return np.stack([self._vec(t) for t in texts]) if len(texts) else np.zeros((0, self.dim), np.float32)

    encode_queries = encode_documents


def run_inputs(cfg: Any) -> tuple[bool, bool]:
    """``(bank, composer)``: whether a run of TrainConfig ``cfg`` reads an experience bank (LOPD; OPSD unless
    its oracle is the dataset's reference) and a cold-start composer (LOPD)."""
    from harness.learners.registry import get_learner

    name = get_learner(cfg.learner).name
    return name == "lopd" or (name == "opsd" and cfg.opsd.oracle != "reference"), name == "lopd"


def make_embedder(spec: BankSpec) -> Any:
    """The embedder a :class:`BankSpec` asks for (None: the bank's own model, loaded on first use)."""
    return HashingEmbedder() if spec.embedder == "hashing" else None


def load_bank(spec: BankSpec) -> ExperienceBank:
    """The bank of ``spec``: loaded from ``path`` and/or built from ``traces``."""
    emb = make_embedder(spec)
    if spec.path and not Path(spec.path).exists():
        raise FileNotFoundError(f"no experience bank at {spec.path} (bank.path): build it with `lopd prepare CONFIG` "
                                "(the micro world: bank and cold-start composer), or `lopd bank build --traces FILE "
                                f"--out {spec.path}`")
    bank = ExperienceBank.load(spec.path, embedder=emb) if spec.path else ExperienceBank(spec.config, emb)
    if spec.traces:
        bank.add_traces(spec.traces)
    return bank


def episode_text(episode: Any, cfg: BankConfig | None = None) -> str | None:
    """An episode rendered like a bank experience (task + observation-lite trajectory)."""
    cfg = cfg or BankConfig()
    task, traj = render_episode(episode, observation_chars=cfg.observation_chars, response_chars=cfg.response_chars,
                                keep_reasoning=cfg.keep_reasoning, executed_calls_only=cfg.executed_calls_only)
    return None if task is None else render_text(task, traj)


OracleSource = Literal["bank", "reference", "bank_then_reference"]


def reference_text(env: Any, task: Any) -> str | None:
    """A dataset's reference solution for ``task``: ``task.data["reference_solution"]`` when the env
    provides one as text, or the micro world's scripted expert played on ``env``."""
    ref = task.data.get("reference_solution") if isinstance(task.data, dict) else None
    if isinstance(ref, str) and ref.strip():
        return ref
    scenario = task.data.get("scenario") if isinstance(task.data, dict) else None
    if isinstance(scenario, dict) and scenario.get("micro"):
        from envs.micro.expert import run_solver
        from envs.micro.sft import experience_of

        traj = run_solver(getattr(env, "unwrapped", env), task.task_id)
        return experience_of(traj) if traj.reward >= 1.0 else None
    return None


def retrieve_texts(bank: ExperienceBank, prompts: Sequence[str], task_ids: Sequence[str], env_id: str,
                   cfg: Any) -> list[list[str]]:
    """LOPD's retrieval: per task, the texts of the bank's ``cfg.n_retrieved`` nearest experiences to
    its prompt within ``env_id``, best first; the task's own entries excluded unless
    ``cfg.allow_self_retrieval`` (``cfg``: a :class:`lopd.config.LOPDConfig`)."""
    if not len(bank) or cfg.n_retrieved < 1:
        return [[] for _ in prompts]
    hits = bank.search(list(prompts), k=cfg.n_retrieved, env=env_id, task_ids=list(task_ids),
                       exclude_self=not cfg.allow_self_retrieval)
    return [[h.experience.text for h in row] for row in hits]


def grow_bank(bank: ExperienceBank, episodes: list, dist: Any, label: str) -> None:
    """Add every rank's episodes (the bank keeps the successful training ones) in rank order, so
    every rank's copy of the bank stays identical."""
    from harness.distributed import gather_objects

    bank.add_episodes([ep for part in gather_objects(list(episodes), dist) for ep in part], label=label)
