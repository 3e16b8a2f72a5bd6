"""Engines: one interface for generation and scoring over token ids.

* :class:`HFEngine` - in-process ``transformers`` model (CPU or GPU), own KV-cache decode loop,
  prefix reuse across multi-turn calls.
* :class:`VLLMEngine` - HTTP client of a running vLLM server (its OpenAI API).
* :class:`SGLangEngine` - HTTP client of a running SGLang server.
* :class:`ServerPool` - several servers behind one engine; :func:`open_servers` launches or attaches
  to them from an :class:`EngineConfig` (the ``engine:`` section of train and eval configs).

Import the classes from here; the clients need no ``vllm`` or ``sglang`` package.
"""

from harness.engines.base import (
    EmbedOverride, Engine, EngineError, GenerationOutput, SamplingParams, ScoreOutput,
)
from harness.engines.hf import HFEngine
from harness.engines.http import ServerFeatureError, ServerUnavailableError
from harness.engines.server import EngineConfig, ServerPool, open_servers
from harness.engines.sglang import SGLangEngine, SGLangFeatureError, SGLangUnavailableError
from harness.engines.vllm import VLLMEngine, VLLMFeatureError, VLLMUnavailableError

__all__ = [
    "EmbedOverride", "Engine", "EngineConfig", "EngineError", "GenerationOutput", "HFEngine", "SGLangEngine",
    "SGLangFeatureError", "SGLangUnavailableError", "SamplingParams", "ScoreOutput", "ServerFeatureError",
    "ServerPool", "ServerUnavailableError", "VLLMEngine", "VLLMFeatureError", "VLLMUnavailableError",
    "open_servers",
]
