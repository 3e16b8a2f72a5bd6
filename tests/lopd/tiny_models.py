"""Tiny seeded Qwen3 backbones and a character tokenizer for the method's unit tests (not a test file)."""

import pytest
import torch

TINY_MODEL_MARKS = [pytest.mark.usefixtures("one_thread"),
                    pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing.*:FutureWarning")]
"""``pytestmark`` of the modules that train on these backbones: one torch thread (tests/conftest.py), and
peft's read of transformers' deprecated ``is_gradient_checkpointing`` is not reported."""


def tiny_qwen3(vocab=64, hidden=64, layers=2, heads=4, kv_heads=2, init=0.1, seed=0):
    """A randomly initialised Qwen3ForCausalLM (head_dim 16, MLP 2 x hidden), seeded: equal calls give equal weights."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen3Config(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=16,
        initializer_range=init,
    )
    return Qwen3ForCausalLM(cfg).eval()


class CharTokenizer:
    """A trivial tokenizer: one id per character, ids 3 .. vocab - 2."""

    def __init__(self, vocab=64):
        self.span = vocab - 4

    def encode(self, text, add_special_tokens=False):
        return [3 + (ord(c) % self.span) for c in text]
