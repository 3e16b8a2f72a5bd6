"""The tiny default model, the project's tokenizer and chat template, and checkpoint loading.

>>> from harness.models import build_tiny_model, count_parameters
>>> model, tok = build_tiny_model("1m")
>>> 0.5e6 < count_parameters(model) < 1.5e6
True
"""

from harness.models.tiny import (
    PRESETS, TinyPreset, build_tiny_model, count_parameters, load_model, save_pretrained, tiny_config,
)
from harness.models.tokenizer import build_tokenizer, chat_template, load_tokenizer

__all__ = [
    "PRESETS", "TinyPreset", "build_tiny_model", "build_tokenizer", "chat_template", "count_parameters",
    "load_model", "load_tokenizer", "save_pretrained", "tiny_config",
]
