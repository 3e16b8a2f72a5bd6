"""HTTP client engine for a running vLLM server (its OpenAI-compatible API; no ``vllm`` import).

Start a server (on CPU: ``make vllm`` builds ``.venv-vllm``; see docs/GPU.md), then::

    VLLM_SERVER_DEV_MODE=1 .venv-vllm/bin/python -m vllm.entrypoints.openai.api_server \\
        --model harness/pinned_base --dtype float32 --enforce-eager --port 8000

    eng = VLLMEngine("http://127.0.0.1:8000", eos_token_ids=[tok.eos_token_id])
    eng.health(); eng.version(); eng.model                   # the served model's name
    outs = eng.generate([prompt_ids], SamplingParams(temperature=0.7, top_p=0.95, top_k=20, seed=1))
    scores = eng.score([full_ids], top_k=20, start=len(prompt_ids))
    eng.update_weights("runs/x/sync/step-3")                 # a save_pretrained dir the server can read
    eng.connect_weight_sync(backend="gloo")                  # or in memory: "nccl" between GPUs
    eng.update_weights(student.state_dict())                 # broadcast; the server reloads in place

Requests are ``POST /v1/completions`` with token-id prompts. Generation asks for the sampled ids
(``return_token_ids``) and their log-probs (``logprobs: 0``; vLLM's default ``raw_logprobs`` mode gives
the model's own distribution, before temperature and top-k/top-p, as :class:`Engine` requires).
Scoring asks for ``prompt_logprobs: k``: per prompt position a dict ``{token_id: {logprob, rank}}``
holding the top k and the actual token. Each row is its own request, several in flight at once
(``max_inflight``), so a group of identical prompts gets distinct per-row seeds and the server's
continuous batching sees every row.

Weight updates use the server's dev-mode endpoints (``VLLM_SERVER_DEV_MODE=1``): ``POST
/collective_rpc`` with ``reload_weights(weights_path=...)`` from a folder, or with the receiver
extension's methods for a sync in memory (:mod:`harness.engines.weight_sync`), then ``POST
/reset_prefix_cache``.

Limit (vLLM 0.32): a ``prompt_embeds`` request returns no prompt log-probs, so scoring under
embedding overrides (LOPD's latent teacher) is impossible here; :meth:`score` sends the request and
raises :class:`VLLMFeatureError` when the server refuses (0.32 answers HTTP 400 "prompt_logprobs is
not compatible with prompt embeds") or the answer lacks them, so a vLLM that adds them is detected,
not assumed. Generation under overrides works (``--enable-prompt-embeds`` on the server).
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from harness.engines.base import (
    EmbedOverride, Engine, EngineError, GenerationOutput, SamplingParams, ScoreOutput, check_overrides,
    check_prompts, row_seed, score_args,
)
from harness.engines.http import HTTPStatusError, JSONClient, ServerFeatureError, ServerUnavailableError
from lopd.latent import inject


class VLLMUnavailableError(ServerUnavailableError):
    """The vLLM server could not be reached."""


class VLLMFeatureError(ServerFeatureError):
    """The vLLM server lacks an endpoint or answer field this call needs."""


_START_HINT = ("start one with `VLLM_SERVER_DEV_MODE=1 .venv-vllm/bin/python -m vllm.entrypoints.openai.api_server "
               "--model <model> --port <port>` (`make vllm` builds .venv-vllm; see docs/GPU.md)")


class VLLMEngine(Engine):
    """Engine backed by a running vLLM server. See the module docstring.

    ``model`` is the served model name (default: the server's only model). ``embedding`` (a [vocab,
    hidden] tensor or a callable ids -> [T, hidden]) is needed only for generation under overrides.
    ``eos_token_ids`` are the ids the server stops on by default (the model's generation config).
    """

    def __init__(self, base_url: str = "http://127.0.0.1:8000", *, model: str | None = None,
                 eos_token_ids: Sequence[int] = (), embedding: torch.Tensor | Callable[[torch.Tensor], torch.Tensor]
                 | None = None, timeout: float = 600.0, api_key: str | None = None, max_inflight: int = 64,
                 retries: int = 3):
        self.http = JSONClient(base_url, server="vLLM", start_hint=_START_HINT, timeout=timeout, api_key=api_key,
                               retries=retries, unavailable=VLLMUnavailableError, feature=VLLMFeatureError)
        self.base_url = self.http.base_url
        self._model = model
        self._eos = [int(t) for t in eos_token_ids]
        self.embedding = embedding
        self.max_inflight = max(1, int(max_inflight))
        self._pool: ThreadPoolExecutor | None = None
        self._sync: Any = None  # harness.engines.weight_sync.CollectiveSync, once connected

    # ---- server facts -----------------------------------------------------------------------
    def health(self) -> bool:
        """GET /health: True when the server answers, else VLLMUnavailableError."""
        self.http.request("GET", "/health")
        return True

    def version(self) -> str:
        out = self.http.request("GET", "/version")
        if not isinstance(out, dict) or not out.get("version"):
            raise VLLMFeatureError(f"the vLLM server at {self.base_url} does not report its version: {out!r}"[:300])
        return str(out["version"])

    def models(self) -> list[dict[str, Any]]:
        """GET /v1/models: the served models (``id``, ``root`` = the path it loaded, ``max_model_len``)."""
        out = self.http.request("GET", "/v1/models")
        if not isinstance(out, dict) or not isinstance(out.get("data"), list):
            raise EngineError(f"unexpected /v1/models answer from {self.base_url}: {out!r}"[:300])
        return [m for m in out["data"] if isinstance(m, dict)]

    @property
    def model(self) -> str:
        """The served model name requests go to (asked once when not given)."""
        if self._model is None:
            names = [str(m.get("id")) for m in self.models()]
            if len(names) != 1:
                raise EngineError(f"the vLLM server at {self.base_url} serves {names}; name one with model=")
            self._model = names[0]
        return self._model

    @property
    def eos_token_ids(self) -> list[int]:
        return list(self._eos)

    def connect_weight_sync(self, *, host: str = "127.0.0.1", backend: str = "gloo", timeout_s: float = 300.0) -> None:
        """Open the in-memory weight sync (:mod:`harness.engines.weight_sync`): after this, :meth:`update_weights`
        also takes a state dict. Raises ``WeightSyncUnavailable`` when the server has no receiver."""
        from harness.engines.weight_sync import CollectiveSync

        sync = CollectiveSync(self.http, host=host, backend=backend, timeout_s=timeout_s)
        sync.connect()
        self._sync = sync

    @property
    def weight_sync(self) -> str:
        """``"collective"`` once :meth:`connect_weight_sync` succeeded, else ``"disk"``."""
        return "collective" if self._sync is not None else "disk"

    def update_weights(self, source: Any) -> None:
        """Load new weights, then drop the server's prefix cache: a state dict in memory (after
        :meth:`connect_weight_sync`), or a checkpoint directory the server can read."""
        if isinstance(source, dict):
            if self.weight_sync != "collective":
                raise EngineError("VLLMEngine.update_weights got a state dict but the in-memory sync is not "
                                  "connected (connect_weight_sync); or pass a checkpoint directory")
            self._sync.send(source)
        elif isinstance(source, str) or hasattr(source, "__fspath__"):
            try:
                self.http.request("POST", "/collective_rpc", {"method": "reload_weights",
                                                               "kwargs": {"weights_path": str(source)}}, retries=0)
            except VLLMFeatureError:
                raise VLLMFeatureError(f"the vLLM server at {self.base_url} has no /collective_rpc: start it with "
                                       "VLLM_SERVER_DEV_MODE=1 to allow weight updates") from None
        else:
            raise EngineError("VLLMEngine.update_weights takes a state dict (with the in-memory sync) or a "
                              f"checkpoint directory the server can read, got {type(source).__name__}")
        self.reset_prefix_cache()

    def reset_prefix_cache(self) -> None:
        self.http.request("POST", "/reset_prefix_cache")

    # ---- requests -------------------------------------------------------------------------------
    def _map(self, fn: Callable[[int], Any], n: int) -> list[Any]:
        """fn(0..n-1), up to ``max_inflight`` requests at once; the first error propagates."""
        if n == 1:
            return [fn(0)]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.max_inflight, thread_name_prefix="vllm")
        return list(self._pool.map(fn, range(n)))

    def _complete(self, payload: dict[str, Any]) -> dict[str, Any]:
        out = self.http.request("POST", "/v1/completions", {"model": self.model, **payload})
        choices = out.get("choices") if isinstance(out, dict) else None
        if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
            raise EngineError(f"unexpected /v1/completions answer from {self.base_url}: {str(out)[:300]}")
        return choices[0]

    def _prompt(self, ids: list[int], ov: EmbedOverride | None) -> dict[str, Any]:
        if ov is None:
            return {"prompt": ids}
        if self.embedding is None:
            raise VLLMFeatureError("overrides need the model's input embedding matrix: pass "
                                   "embedding=model.get_input_embeddings().weight to VLLMEngine")
        t = torch.tensor(ids, dtype=torch.long)
        base = self.embedding[t] if isinstance(self.embedding, torch.Tensor) else self.embedding(t)
        embeds = inject(base.detach().float().cpu(), ov.positions, ov.embeds.detach().float().cpu())
        buf = io.BytesIO()
        torch.save(embeds.contiguous(), buf)  # vLLM's documented prompt_embeds encoding
        return {"prompt_embeds": base64.b64encode(buf.getvalue()).decode("ascii")}

    # ---- generation -------------------------------------------------------------------------
    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams | None = None,
                 overrides: Sequence[EmbedOverride | None] | None = None) -> list[GenerationOutput]:
        params = (params or SamplingParams()).validate()
        ids = check_prompts(prompts)
        ovs = check_overrides(overrides, [len(p) for p in ids])

        def one(i: int) -> GenerationOutput:
            sp = sampling_payload(params, row_seed(params.seed, i))
            choice = self._complete({**self._prompt(ids[i], ovs[i]), **sp})
            return _parse_generation(choice, len(ids[i]))

        return self._map(one, len(ids))

    # ---- scoring ------------------------------------------------------------------------------
    def score(self, sequences: Sequence[Sequence[int]], *, top_k: int = 20, start: int | Sequence[int] = 1,
              overrides: Sequence[EmbedOverride | None] | None = None) -> list[ScoreOutput]:
        seqs, ovs, st = score_args(sequences, top_k, start, overrides)

        def one(i: int) -> ScoreOutput:
            try:
                choice = self._complete({**self._prompt(seqs[i], ovs[i]), "max_tokens": 1, "temperature": 0.0,
                                         "prompt_logprobs": top_k})
            except HTTPStatusError as e:
                if ovs[i] is None or e.status != 400:
                    raise
                raise self._no_embed_scores(e.detail) from None
            rows = choice.get("prompt_logprobs")
            if ovs[i] is not None and (not isinstance(rows, list) or any(r is None for r in rows[st[i]:])):
                raise self._no_embed_scores("the answer has no prompt_logprobs")
            return _parse_score(rows, seqs[i], st[i], top_k)

        return self._map(one, len(seqs))

    def _no_embed_scores(self, why: str) -> VLLMFeatureError:
        return VLLMFeatureError(
            f"the vLLM server at {self.base_url} cannot score under embedding overrides ({why.strip()[:300]}): "
            "vLLM 0.32 returns no prompt log-probs for prompt_embeds requests. Score latent context on an SGLang "
            "server or in-process (docs/GPU.md)")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self.disconnect_weight_sync()

    def disconnect_weight_sync(self) -> None:
        """Back to checkpoint directories only."""
        sync, self._sync = self._sync, None
        if sync is not None:
            sync.close()


def sampling_payload(p: SamplingParams, seed: int | None) -> dict[str, Any]:
    """The /v1/completions sampling fields for our SamplingParams (and one row's seed)."""
    out: dict[str, Any] = {
        "max_tokens": int(p.max_new_tokens), "temperature": float(p.temperature), "top_p": float(p.top_p),
        "top_k": int(p.top_k) if p.top_k > 0 else -1, "logprobs": 0, "return_token_ids": True,
        # Ids are the truth; keep special tokens and stop strings in the text anyway.
        "skip_special_tokens": False, "spaces_between_special_tokens": False, "include_stop_str_in_output": True,
        **p.stop_fields(),
    }
    if seed is not None:
        out["seed"] = seed
    return out


def _parse_generation(choice: dict[str, Any], prompt_len: int) -> GenerationOutput:
    ids = choice.get("token_ids")
    lp = choice.get("logprobs")
    lps = lp.get("token_logprobs") if isinstance(lp, dict) else None
    if not isinstance(ids, list) or not isinstance(lps, list) or len(ids) != len(lps):
        raise EngineError(f"vLLM answer lacks aligned token_ids and logprobs.token_logprobs: {str(choice)[:300]}")
    reason = choice.get("finish_reason")
    if reason not in ("stop", "length"):
        raise EngineError(f"vLLM finished a request with {reason!r}: {str(choice)[:300]}")
    matched = choice.get("stop_reason")
    return GenerationOutput([int(t) for t in ids], [math.nan if x is None else float(x) for x in lps], reason,
                            matched if reason == "stop" else None, choice.get("text"), prompt_len=prompt_len)


def _parse_score(rows: Any, seq: list[int], start: int, top_k: int) -> ScoreOutput:
    """ScoreOutput from ``prompt_logprobs`` (one entry per prompt position, None at 0)."""
    if not isinstance(rows, list) or len(rows) != len(seq):
        raise EngineError(f"vLLM returned {len(rows) if isinstance(rows, list) else rows!r} prompt log-prob "
                          f"entries for a sequence of {len(seq)}")
    n = len(seq) - start
    tok = torch.zeros(n)
    top_ids = torch.zeros(n, top_k, dtype=torch.long)
    top_lp = torch.zeros(n, top_k)
    for r, t in enumerate(range(start, len(seq))):
        entry = rows[t]
        if not isinstance(entry, dict) or str(seq[t]) not in entry:
            raise EngineError(f"vLLM prompt log-probs lack the scored token {seq[t]} at position {t}")
        tok[r] = float(entry[str(seq[t])]["logprob"])
        ranked = sorted(((int(v["rank"]), int(k), float(v["logprob"])) for k, v in entry.items()
                         if int(v["rank"]) <= top_k))
        if len(ranked) < top_k:
            raise EngineError(f"vLLM returned {len(ranked)} top log-probs where {top_k} were asked "
                              "(is the server's --max-logprobs below it?)")
        top_ids[r] = torch.tensor([k for _, k, _ in ranked[:top_k]])
        top_lp[r] = torch.tensor([x for _, _, x in ranked[:top_k]])
    return ScoreOutput(start, tok, top_ids, top_lp)
