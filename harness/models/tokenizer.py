"""The project's own tokenizer: byte-level BPE with Qwen3's special tokens and chat template.

Built with the ``tokenizers`` library from the built-in corpus (:mod:`harness.models.corpus`),
wrapped as a ``transformers`` fast tokenizer and saved with ``save_pretrained`` like any
checkpoint's tokenizer::

    tok = build_tokenizer()                      # deterministic; ~1k tokens
    tok.save_pretrained("runs/tiny")             # tokenizer.json + config + chat template
    tok = load_tokenizer("runs/tiny")            # or a real Qwen3 checkpoint directory
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)

Byte-level BPE can encode any Unicode string, so tool results and model output never hit an
unknown token.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from harness.models.corpus import build_corpus
from lopd.latent import PLACEHOLDER_TOKEN

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
# Control tokens: removed by ``decode(skip_special_tokens=True)``.
CONTROL_TOKENS = [ENDOFTEXT, IM_START, IM_END, PLACEHOLDER_TOKEN]
# Markup tokens: single tokens that stay in decoded text (as in Qwen3, where they are not "special").
MARKUP_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
DEFAULT_VOCAB_SIZE = 1024


def chat_template() -> str:
    """The Jinja chat template shipped with the project (Qwen3's text format)."""
    return resources.files("harness.models").joinpath("chat_template.jinja").read_text(encoding="utf-8")


def train_bpe(vocab_size: int = DEFAULT_VOCAB_SIZE, corpus: list[str] | None = None) -> Tokenizer:
    """Train the raw byte-level BPE ``tokenizers.Tokenizer``: control tokens get the first ids,
    markup tags the last."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, show_progress=False,
        special_tokens=CONTROL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus if corpus is not None else build_corpus(), trainer=trainer)
    # Markup tags: never split, but kept by skip_special_tokens (as in Qwen3, where they are
    # added tokens that are not "special").
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
    return tok


def build_tokenizer(vocab_size: int = DEFAULT_VOCAB_SIZE, corpus: list[str] | None = None) -> PreTrainedTokenizerFast:
    """The project's tokenizer as a ``transformers`` fast tokenizer, chat template included.

    ``eos_token`` is ``<|im_end|>`` (the end of an assistant turn), ``pad_token`` ``<|endoftext|>``,
    as in Qwen3's instruct checkpoints.
    """
    return wrap_tokenizer(train_bpe(vocab_size, corpus))


def wrap_tokenizer(raw: Tokenizer) -> PreTrainedTokenizerFast:
    """A raw ``tokenizers`` model with the project's layout as a ``transformers`` fast tokenizer:
    ``<|im_end|>`` as eos, ``<|endoftext|>`` as pad, left padding, the chat template."""
    tok = PreTrainedTokenizerFast(
        tokenizer_object=raw, eos_token=IM_END, pad_token=ENDOFTEXT, bos_token=None, unk_token=None,
        additional_special_tokens=[IM_START, PLACEHOLDER_TOKEN], padding_side="left",
        clean_up_tokenization_spaces=False, model_max_length=32768,
    )
    tok.chat_template = chat_template()
    return tok


def load_tokenizer(path: str | os.PathLike) -> PreTrainedTokenizerBase:
    """Load a saved tokenizer (the project's or a real Qwen3 checkpoint's) from a local directory."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"no tokenizer directory at {path}")
    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if tok.pad_token is None:  # generation pads prompts; fall back to eos
        tok.pad_token = tok.eos_token
    return tok
