"""Traces as Hugging Face ``datasets`` and back (docs/TRACES.md): :mod:`.hf` writes our episodes as OpenAI-style
rows (``save_to_disk`` or JSONL) and reads rows, ours or anybody's, from a saved folder, parquet or JSONL.
The row format itself is :mod:`envs.trace_rows`."""

from harness.traces.hf import (is_rows_source, iter_episodes, read_episodes, write_hf, write_openai_jsonl)

__all__ = ["is_rows_source", "iter_episodes", "read_episodes", "write_hf", "write_openai_jsonl"]
