"""Engines: one interface for generation and scoring over token ids.

* :class:`HFEngine` - in-process ``transformers`` model (CPU or GPU), own KV-cache decode loop,
  prefix reuse across multi-turn calls.
* :class:`SGLangEngine` - HTTP client of a running SGLang server.

Import the classes from here; ``harness.engines.sglang`` needs no ``sglang`` package.
"""

from harness.engines.base import (
    EmbedOverride, Engine, EngineError, GenerationOutput, SamplingParams, ScoreOutput,
)
from harness.engines.hf import HFEngine
from harness.engines.sglang import SGLangEngine, SGLangFeatureError, SGLangUnavailableError

__all__ = [
    "EmbedOverride", "Engine", "EngineError", "GenerationOutput", "HFEngine", "SGLangEngine",
    "SGLangFeatureError", "SGLangUnavailableError", "SamplingParams", "ScoreOutput",
]
