"""The official Qwen3 shapes, known without a download, and random-weight models built at them.

``QWEN3_CONFIGS`` holds the architecture fields of the Hugging Face ``config.json`` of Qwen/Qwen3-4B and
Qwen/Qwen3-8B (huggingface.co/Qwen/Qwen3-4B/blob/main/config.json, .../Qwen3-8B/blob/main/config.json):

==================  =========  =========
field               Qwen3-4B   Qwen3-8B
==================  =========  =========
hidden_size         2560       4096
intermediate_size   9728       12288
num_hidden_layers   36         36
num_attention_heads 32         32
num_key_value_heads 8          8
head_dim            128        128
vocab_size          151936     151936
tie_word_embeddings true       false
==================  =========  =========

(both: ``rope_theta`` 1,000,000, ``rms_norm_eps`` 1e-6, ``max_position_embeddings`` 40,960, every layer full
attention). ``lopd train CONFIG --dry-run`` builds random weights at these shapes when ``model.path`` names a
model whose weights are not on disk (:func:`shape_for`); the benchmarks build ``layers`` layers of Qwen3-4B's
width with :func:`save_shape`.

>>> shape_for("Qwen/Qwen3-4B")["hidden_size"], shape_for("/models/Qwen3-8B")["hidden_size"], shape_for("gpt2")
(2560, 4096, None)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

_COMMON = {"num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
           "vocab_size": 151_936, "rope_theta": 1_000_000.0, "rms_norm_eps": 1e-6,
           "max_position_embeddings": 40_960, "hidden_act": "silu", "attention_bias": False}

QWEN3_CONFIGS: dict[str, dict[str, Any]] = {
    "Qwen/Qwen3-4B": {**_COMMON, "hidden_size": 2560, "intermediate_size": 9728, "tie_word_embeddings": True},
    "Qwen/Qwen3-8B": {**_COMMON, "hidden_size": 4096, "intermediate_size": 12_288, "tie_word_embeddings": False},
}
"""Architecture fields of the official config.json of each model (the table above)."""

QWEN3_4B = {k: QWEN3_CONFIGS["Qwen/Qwen3-4B"][k] for k in ("hidden_size", "num_attention_heads",
                                                             "num_key_value_heads", "head_dim",
                                                             "intermediate_size", "vocab_size")}
"""Qwen3-4B's width (no layer count): what the benchmarks' ``save_shape`` stacks ``layers`` layers of."""


def shape_for(path: str) -> dict[str, Any] | None:
    """The official config of the Qwen3 model ``path`` names (``Qwen/Qwen3-4B``, ``/models/Qwen3-8B``, a folder
    ending ``Qwen3-4B-untied``...; case-insensitive, by the last path part), or None."""
    name = Path(str(path).rstrip("/")).name.lower()
    for key, shape in QWEN3_CONFIGS.items():
        stem = key.split("/")[1].lower()
        if name == stem or name.startswith(stem + "-") and not name[len(stem) + 1:][:1].isdigit():
            return dict(shape)
    return None


def random_qwen3(shape: dict[str, Any], tokenizer: Any, layers: int | None = None, vocab: int | None = None,
                 seed: int = 0) -> Any:
    """A ``Qwen3ForCausalLM`` with random weights at ``shape`` (config.json fields), ``layers`` decoder layers
    if given, ``vocab`` embedding rows if given (never fewer than the tokenizer's), the project's tokenizer's
    special tokens. In float32; cast it after."""
    import torch
    from transformers import Qwen3ForCausalLM

    from harness.models.tiny import tiny_config

    cfg = tiny_config("1m", tokenizer)
    n = layers or shape.get("num_hidden_layers") or cfg.num_hidden_layers
    fields = {**shape, "num_hidden_layers": n, "layer_types": ["full_attention"] * n}
    fields["vocab_size"] = max(vocab or fields.get("vocab_size") or cfg.vocab_size, len(tokenizer))
    for k, v in fields.items():
        setattr(cfg, k, v)
    torch.manual_seed(seed)
    return Qwen3ForCausalLM(cfg)


def save_shape(path: str | os.PathLike, layers: int, vocab: int | None = None, dtype: str = "bfloat16") -> None:
    """``layers`` layers of Qwen3-4B's shape, random weights (``vocab`` rows instead of 151,936 if given), saved
    with the project's tokenizer."""
    import torch

    from harness.models.tiny import build_tiny_model, save_pretrained

    _, tok = build_tiny_model("1m")
    model = random_qwen3(QWEN3_4B, tok, layers=layers, vocab=vocab)
    save_pretrained(model.to(getattr(torch, dtype)), tok, path)
