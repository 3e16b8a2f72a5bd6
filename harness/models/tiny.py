"""The tiny default model: a Qwen3ForCausalLM small enough to train on a laptop CPU.

Presets (parameter counts with tied embeddings and the project's ~1k-token vocabulary):

=========  ======  ======  =====  ===  =====  ============
preset     params  hidden  layers heads kv    intermediate
=========  ======  ======  =====  ===  =====  ============
``1m``     ~0.9M   128     4      4    2      384
``5m``     ~5.0M   256     6      8    4      768
=========  ======  ======  =====  ===  =====  ============

Build, save and load; a real Qwen3 checkpoint directory loads through the same function::

    model, tok = build_tiny_model("1m", seed=0)
    save_pretrained(model, tok, "runs/tiny-1m")       # model + tokenizer + chat template
    model, tok = load_model("runs/tiny-1m")           # or load_model("/models/Qwen3-8B")

Or from a shell: ``python -m harness.models.tiny --preset 5m --out runs/tiny-5m``.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, GenerationConfig, PreTrainedTokenizerBase, Qwen3Config, Qwen3ForCausalLM
from transformers.utils import logging as hf_logging

from harness.models.tokenizer import ENDOFTEXT, IM_END, build_tokenizer, load_tokenizer


@dataclass(frozen=True)
class TinyPreset:
    """Shape of a tiny Qwen3."""

    hidden_size: int
    """Residual width."""
    num_hidden_layers: int
    """Decoder layers."""
    num_attention_heads: int
    """Query heads."""
    num_key_value_heads: int
    """Key/value heads (grouped-query attention, as in Qwen3)."""
    intermediate_size: int
    """SwiGLU width."""
    head_dim: int = 32
    """Per-head width."""


PRESETS: dict[str, TinyPreset] = {
    "1m": TinyPreset(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                     intermediate_size=384),
    "5m": TinyPreset(hidden_size=256, num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=4,
                     intermediate_size=768),
}


def _round_up(n: int, multiple: int = 64) -> int:
    return (n + multiple - 1) // multiple * multiple


def tiny_config(preset: str | TinyPreset, tokenizer: PreTrainedTokenizerBase) -> Qwen3Config:
    """A Qwen3Config of the given preset for ``tokenizer`` (vocab rounded up to a multiple of 64,
    like Qwen3's padded embedding matrix)."""
    p = PRESETS[preset] if isinstance(preset, str) else preset
    if isinstance(preset, str) and preset not in PRESETS:
        raise KeyError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    eos = [tokenizer.convert_tokens_to_ids(IM_END), tokenizer.convert_tokens_to_ids(ENDOFTEXT)]
    return Qwen3Config(
        vocab_size=_round_up(len(tokenizer)), hidden_size=p.hidden_size,
        intermediate_size=p.intermediate_size, num_hidden_layers=p.num_hidden_layers,
        num_attention_heads=p.num_attention_heads, num_key_value_heads=p.num_key_value_heads,
        head_dim=p.head_dim, max_position_embeddings=8192, rope_theta=1_000_000.0, rms_norm_eps=1e-6,
        tie_word_embeddings=True, attention_bias=False, use_sliding_window=False,
        bos_token_id=None, eos_token_id=eos, pad_token_id=tokenizer.pad_token_id,
    )


def build_tiny_model(preset: str = "1m", *, seed: int = 0,
                     tokenizer: PreTrainedTokenizerBase | None = None) -> tuple[Qwen3ForCausalLM, PreTrainedTokenizerBase]:
    """A freshly initialised tiny Qwen3 (fp32, eval mode) and the project's tokenizer."""
    if preset not in PRESETS:
        raise KeyError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    tok = tokenizer if tokenizer is not None else build_tokenizer()
    cfg = tiny_config(preset, tok)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(cfg)
    model.generation_config = GenerationConfig(eos_token_id=cfg.eos_token_id, pad_token_id=cfg.pad_token_id)
    return model.eval(), tok


def count_parameters(model: torch.nn.Module) -> int:
    """Distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def save_pretrained(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, path: str | os.PathLike) -> Path:
    """Save model (safetensors), tokenizer and chat template into one directory."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    hf_logging.disable_progress_bar()
    model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


def keep_layers(config: Any, n: int | None, what: str = "the model") -> Any:
    """``config`` (a transformers config) with its first ``n`` decoder layers (None: unchanged); more
    layers than it has is an error naming ``what``."""
    if n is None or n == config.num_hidden_layers:
        return config
    if n > config.num_hidden_layers:
        raise ValueError(f"model.num_hidden_layers={n}: {what} has only {config.num_hidden_layers} layers")
    config.num_hidden_layers = n
    if getattr(config, "layer_types", None):
        config.layer_types = list(config.layer_types)[:n]
    return config


def truncate_layers(model: torch.nn.Module, n: int | None) -> torch.nn.Module:
    """``model`` with only its first ``n`` decoder layers (None: unchanged)."""
    if n is None or n == model.config.num_hidden_layers:
        return model
    keep_layers(model.config, n)
    decoder = model.get_decoder()
    decoder.layers = decoder.layers[:n]
    return model


def load_model(path: str | os.PathLike, *, dtype: torch.dtype | str | None = None,
               device: str | torch.device | None = None,
               num_hidden_layers: int | None = None) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    """Load a causal LM and its tokenizer from a local directory: a tiny model saved by
    :func:`save_pretrained`, or a real Qwen3 checkpoint (``dtype="auto"`` keeps its bf16).
    ``num_hidden_layers``: keep only the first N decoder layers (the others' weights are not read)."""
    path = Path(path)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} is not a model directory (no config.json)")
    hf_logging.disable_progress_bar()
    extra: dict[str, Any] = {}
    if num_hidden_layers is not None:
        from transformers import AutoConfig

        extra["config"] = keep_layers(AutoConfig.from_pretrained(str(path), local_files_only=True),
                                      num_hidden_layers, str(path))
    verbosity = hf_logging.get_verbosity()
    if extra:
        hf_logging.set_verbosity_error()  # the dropped layers' weights are "not used": expected
    try:
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype if dtype is not None else torch.float32,
                                                     local_files_only=True, **extra)
    finally:
        hf_logging.set_verbosity(verbosity)
    if device is not None:
        model = model.to(device)
    return model.eval(), load_tokenizer(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Build and save a tiny Qwen3 model with the project's tokenizer.")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="1m")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="directory to write")
    args = ap.parse_args(argv)
    model, tok = build_tiny_model(args.preset, seed=args.seed)
    out = save_pretrained(model, tok, args.out)
    print(f"saved {args.preset} ({count_parameters(model):,} parameters) to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
