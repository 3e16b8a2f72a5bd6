"""HTTP client engine for a running SGLang server (no ``sglang`` import needed).

Start a server on a GPU machine (see docs/GPU.md), then::

    eng = SGLangEngine("http://127.0.0.1:30000", eos_token_ids=[151645, 151643])
    eng.health(); eng.version()
    outs = eng.generate([prompt_ids], SamplingParams(temperature=0.7, top_p=0.95, top_k=20))
    scores = eng.score([full_ids], top_k=20, start=len(prompt_ids))
    eng.update_weights("/ckpt/step-10")            # POST /update_weights_from_disk

Requests follow SGLang's native ``/generate`` API: ``input_ids`` (or ``input_embeds``),
``sampling_params``, ``return_logprob``, ``logprob_start_len``, ``top_logprobs_num`` and
``token_ids_logprob``; log-probs come back in ``meta_info`` as ``[logprob, token_id, text]``
triples (``output_token_logprobs``, ``input_token_logprobs``, ``input_top_logprobs``,
``input_token_ids_logprobs``).

Embedding overrides (latent injection) travel one of two ways:

* ``override_mode="input_embeds"`` (default, any recent server): the client looks up the
  prompt's embeddings in ``embedding`` (the model's input embedding matrix, [vocab, hidden]),
  splices the override vectors in with :func:`lopd.latent.inject`, and sends the whole
  sequence as ``input_embeds``. Start the server with ``--disable-radix-cache``. The payload is
  large (hidden floats per token). The server does not know the token ids of such a prompt,
  so scoring asks for the real next tokens through ``token_ids_logprob``.
* ``override_mode="positional"``: sends ``input_ids`` plus ``positional_embed_overrides``
  (``{"embeds": [[...]], "positions": [...]}`` per sequence), the field recent SGLang versions
  carry on ``GenerateReqInput``. Whether a server accepts it over HTTP depends on its version;
  one that rejects it raises :class:`SGLangFeatureError`. benchmarks/gpu_smoke.py checks both.

These tests run against a local fake server that records requests and answers in SGLang's
documented shapes; they prove the payloads and the parsing, not a real server.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch

from harness.engines.base import (
    EmbedOverride, Engine, EngineError, GenerationOutput, SamplingParams, ScoreOutput, check_overrides,
    check_prompts, score_args,
)
from harness.engines.http import HTTPStatusError, JSONClient, ServerFeatureError, ServerUnavailableError
from lopd.latent import inject


class SGLangUnavailableError(ServerUnavailableError):
    """The server could not be reached."""


class SGLangFeatureError(ServerFeatureError):
    """The server lacks an endpoint or request field this call needs."""


OverrideMode = Literal["input_embeds", "positional"]


def sampling_payload(p: SamplingParams, *, send_seed: bool = True) -> dict[str, Any]:
    """SGLang ``sampling_params`` for our SamplingParams (only fields that are set are sent).

    The seed travels as ``sampling_seed``, which SGLang honours in builds with deterministic
    sampling; pass ``send_seed=False`` for servers that reject the field."""
    sp: dict[str, Any] = {
        "temperature": float(p.temperature), "top_p": float(p.top_p),
        "top_k": int(p.top_k) if p.top_k > 0 else -1, "max_new_tokens": int(p.max_new_tokens),
        # Keep special tokens and stop strings in the text; the ids are the truth anyway.
        "skip_special_tokens": False, "no_stop_trim": True, **p.stop_fields(),
    }
    if p.seed is not None and send_seed:
        sp["sampling_seed"] = int(p.seed)
    return sp


class SGLangEngine(Engine):
    """Engine backed by a running SGLang server. See the module docstring.

    ``embedding`` (a [vocab, hidden] tensor or a callable ids -> [T, hidden]) is needed only for
    overrides in ``input_embeds`` mode. ``eos_token_ids`` are the ids the server stops on by
    default (the model's generation config); the rollout uses them to recognise a closed turn.
    """

    def __init__(self, base_url: str = "http://127.0.0.1:30000", *, eos_token_ids: Sequence[int] = (),
                 embedding: torch.Tensor | Callable[[torch.Tensor], torch.Tensor] | None = None,
                 override_mode: OverrideMode = "input_embeds", timeout: float = 600.0,
                 api_key: str | None = None, max_batch: int = 256, send_seed: bool = True):
        if override_mode not in ("input_embeds", "positional"):
            raise ValueError(f"override_mode must be 'input_embeds' or 'positional', got {override_mode!r}")
        self.http = JSONClient(base_url, server="SGLang", timeout=timeout, api_key=api_key,
                               start_hint="start one with `python -m sglang.launch_server --model-path <model> "
                                          "--port <port>` (see docs/GPU.md)",
                               unavailable=SGLangUnavailableError, feature=SGLangFeatureError)
        self.base_url = self.http.base_url
        self._eos = [int(t) for t in eos_token_ids]
        self.embedding = embedding
        self.override_mode = override_mode
        self.max_batch = int(max_batch)
        self.send_seed = send_seed

    # ---- HTTP -----------------------------------------------------------------------------
    def _request(self, method: str, path: str, payload: Any = None) -> Any:
        try:
            return self.http.request(method, path, payload)
        except HTTPStatusError as e:
            if e.status in (400, 422) and ("positional_embed_overrides" in e.detail or "input_embeds" in e.detail):
                raise SGLangFeatureError(f"SGLang server rejected the embedding request: {e.detail}") from None
            raise

    def health(self) -> bool:
        """GET /health; True when the server answers, else SGLangUnavailableError/EngineError."""
        self._request("GET", "/health")
        return True

    def server_info(self) -> dict[str, Any]:
        """GET /get_server_info (or /server_info on versions that renamed it)."""
        for path in ("/get_server_info", "/server_info"):
            try:
                info = self._request("GET", path)
            except SGLangFeatureError:
                continue
            if isinstance(info, dict):
                return info
        raise SGLangFeatureError(f"SGLang server at {self.base_url} has neither /get_server_info nor /server_info")

    def version(self) -> str:
        """The server's SGLang version string (from the server info, else GET /version)."""
        try:
            v = self.server_info().get("version")
        except SGLangFeatureError:
            v = None
        if not v:
            out = self._request("GET", "/version")
            v = out.get("version") if isinstance(out, dict) else out
        if not v:
            raise SGLangFeatureError(f"SGLang server at {self.base_url} does not report its version")
        return str(v)

    def model_info(self) -> dict[str, Any]:
        """GET /get_model_info: model_path, tokenizer_path, is_generation, ..."""
        info = self._request("GET", "/get_model_info")
        if not isinstance(info, dict):
            raise EngineError(f"unexpected /get_model_info answer: {info!r}"[:300])
        return info

    def flush_cache(self) -> None:
        """POST /flush_cache: drop the server's radix (prefix) cache."""
        self._request("POST", "/flush_cache")

    @property
    def eos_token_ids(self) -> list[int]:
        return list(self._eos)

    def update_weights(self, source: Any) -> None:
        """POST /update_weights_from_disk with a checkpoint directory on the server's filesystem."""
        if isinstance(source, dict) and "model_path" in source:
            payload = dict(source)
        elif isinstance(source, (str, bytes)) or hasattr(source, "__fspath__"):
            payload = {"model_path": str(source if not isinstance(source, bytes) else source.decode())}
        else:
            raise EngineError("SGLangEngine.update_weights takes a checkpoint path the server can read "
                              f"(save the model with save_pretrained first), got {type(source).__name__}")
        out = self._request("POST", "/update_weights_from_disk", payload)
        if not isinstance(out, dict) or not out.get("success", False):
            msg = out.get("message") if isinstance(out, dict) else out
            raise EngineError(f"SGLang could not load weights from {payload['model_path']}: {msg}")

    # ---- request building -----------------------------------------------------------------
    def _embeds(self, ids: list[int], ov: EmbedOverride) -> list[list[float]]:
        if self.embedding is None:
            raise SGLangFeatureError("input_embeds overrides need the model's input embedding matrix: "
                                     "pass embedding=model.get_input_embeddings().weight to SGLangEngine")
        t = torch.tensor(ids, dtype=torch.long)
        table = self.embedding
        base = table[t] if isinstance(table, torch.Tensor) else table(t)
        base = base.detach().float().cpu()
        return inject(base, ov.positions, ov.embeds.detach().float().cpu()).tolist()

    def _inputs(self, ids: list[list[int]], ovs: list[EmbedOverride | None]) -> dict[str, Any]:
        """The input part of a /generate request for rows that all have, or all lack, overrides."""
        if ovs[0] is None:
            return {"input_ids": ids}
        if self.override_mode == "input_embeds":
            return {"input_embeds": [self._embeds(i, ov) for i, ov in zip(ids, ovs)]}  # type: ignore[arg-type]
        return {"input_ids": ids, "positional_embed_overrides": [
            {"embeds": ov.embeds.detach().float().cpu().tolist(), "positions": list(ov.positions)}
            for ov in ovs]}  # type: ignore[union-attr]

    def _groups(self, n: int, ovs: list[EmbedOverride | None]) -> list[list[int]]:
        """Row indices per request: rows with and without overrides cannot share one request."""
        plain = [i for i in range(n) if ovs[i] is None]
        over = [i for i in range(n) if ovs[i] is not None]
        groups = []
        for rows in (plain, over):
            for k in range(0, len(rows), self.max_batch):
                groups.append(rows[k:k + self.max_batch])
        return groups

    def _post_generate(self, payload: dict[str, Any], n: int) -> list[dict[str, Any]]:
        out = self._request("POST", "/generate", payload)
        if isinstance(out, dict):
            out = [out]
        if not isinstance(out, list) or len(out) != n or not all(isinstance(o, dict) for o in out):
            raise EngineError(f"SGLang /generate returned {type(out).__name__} for {n} requests")
        for o in out:
            if not isinstance(o.get("meta_info"), dict):
                raise EngineError(f"SGLang /generate answer has no meta_info: {str(o)[:300]}")
        return out

    # ---- generation -----------------------------------------------------------------------
    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams | None = None,
                 overrides: Sequence[EmbedOverride | None] | None = None) -> list[GenerationOutput]:
        params = (params or SamplingParams()).validate()
        ids = check_prompts(prompts)
        ovs = check_overrides(overrides, [len(p) for p in ids])
        results: list[GenerationOutput | None] = [None] * len(ids)
        for rows in self._groups(len(ids), ovs):
            payload = {**self._inputs([ids[i] for i in rows], [ovs[i] for i in rows]),
                       "sampling_params": sampling_payload(params, send_seed=self.send_seed),
                       "return_logprob": True, "logprob_start_len": -1, "stream": False}
            for i, res in zip(rows, self._post_generate(payload, len(rows))):
                results[i] = _parse_generation(res, len(ids[i]))
        return results  # type: ignore[return-value]

    # ---- scoring --------------------------------------------------------------------------
    def score(self, sequences: Sequence[Sequence[int]], *, top_k: int = 20, start: int | Sequence[int] = 1,
              overrides: Sequence[EmbedOverride | None] | None = None) -> list[ScoreOutput]:
        seqs, ovs, st = score_args(sequences, top_k, start, overrides)
        results: list[ScoreOutput | None] = [None] * len(seqs)
        for rows in self._groups(len(seqs), ovs):
            # One request per start position keeps logprob_start_len a plain int per request.
            by_start: dict[int, list[int]] = {}
            for i in rows:
                by_start.setdefault(st[i], []).append(i)
            for s, group in by_start.items():
                payload = self._score_payload([seqs[i] for i in group], [ovs[i] for i in group], s, top_k)
                for i, res in zip(group, self._post_generate(payload, len(group))):
                    results[i] = _parse_score(res, seqs[i], s, top_k, by_id="token_ids_logprob" in payload)
        return results  # type: ignore[return-value]

    def _score_payload(self, seqs: list[list[int]], ovs: list[EmbedOverride | None], start: int,
                       top_k: int) -> dict[str, Any]:
        payload: dict[str, Any] = {**self._inputs(seqs, ovs),
                                   "sampling_params": {"max_new_tokens": 0, "temperature": 0.0},
                                   # SGLang's first input entry is always None (no log-prob for the
                                   # token at logprob_start_len), so start one earlier; the parser
                                   # keeps the last len(seq) - start entries.
                                   "return_logprob": True, "logprob_start_len": start - 1, "stream": False}
        if top_k:
            payload["top_logprobs_num"] = top_k
        if "input_embeds" in payload:
            # The server cannot know the ids behind embeddings: ask for the real tokens by id.
            payload["token_ids_logprob"] = [sorted(set(s[start:])) for s in seqs]
        return payload


def _triples(entries: Any, what: str) -> list[tuple[float | None, int]]:
    if not isinstance(entries, list):
        raise EngineError(f"SGLang answer lacks {what}")
    out = []
    for e in entries:
        if not isinstance(e, (list, tuple)) or len(e) < 2:
            raise EngineError(f"malformed {what} entry {e!r}"[:200])
        lp = None if e[0] is None else float(e[0])
        out.append((lp, int(e[1])))
    return out


def _parse_generation(res: dict[str, Any], prompt_len: int) -> GenerationOutput:
    meta = res["meta_info"]
    fin = meta.get("finish_reason") or {}
    kind = fin.get("type") if isinstance(fin, dict) else str(fin)
    if kind == "abort":
        raise EngineError(f"SGLang aborted the request: {fin.get('message', fin)}")
    trip = _triples(meta.get("output_token_logprobs"), "meta_info.output_token_logprobs")
    ids = [t for _, t in trip]
    lps = [math.nan if lp is None else lp for lp, _ in trip]
    if isinstance(res.get("output_ids"), list) and [int(t) for t in res["output_ids"]] != ids:
        raise EngineError("SGLang output_ids disagree with output_token_logprobs")
    matched = fin.get("matched") if isinstance(fin, dict) else None
    if kind == "stop" and isinstance(matched, int) and (not ids or ids[-1] != matched):
        # Keep token-in/token-out exact: the stop token belongs to the sampled sequence.
        ids.append(matched)
        lps.append(math.nan)
    return GenerationOutput(ids, lps, "stop" if kind == "stop" else "length", matched, res.get("text"),
                            prompt_len=prompt_len, cached_prompt_tokens=int(meta.get("cached_tokens", 0) or 0))


def _parse_score(res: dict[str, Any], seq: list[int], start: int, top_k: int, by_id: bool) -> ScoreOutput:
    meta = res["meta_info"]
    n = len(seq) - start
    if by_id:
        rows = meta.get("input_token_ids_logprobs")
        if not isinstance(rows, list) or len(rows) < n:
            raise SGLangFeatureError("the server returned no input_token_ids_logprobs for an input_embeds request")
        rows = rows[len(rows) - n:]
        tok = []
        for t, row in zip(seq[start:], rows):
            found = [lp for lp, tid in _triples(row or [], "input_token_ids_logprobs") if tid == t]
            if not found or found[0] is None:
                raise EngineError(f"no log-prob for token {t} in input_token_ids_logprobs")
            tok.append(found[0])
    else:
        trip = _triples(meta.get("input_token_logprobs"), "meta_info.input_token_logprobs")
        if len(trip) < n:
            raise EngineError(f"SGLang returned {len(trip)} input log-probs for {n} positions")
        trip = trip[len(trip) - n:]  # entries are aligned to the end of the prompt
        if [t for _, t in trip] != seq[start:]:
            raise EngineError("SGLang input_token_logprobs are not aligned with the scored tokens")
        if any(lp is None for lp, _ in trip):
            raise EngineError("SGLang returned no log-prob for a scored position")
        tok = [lp for lp, _ in trip]
    top_ids = torch.zeros(n, top_k, dtype=torch.long)
    top_lp = torch.zeros(n, top_k)
    if top_k:
        tops = meta.get("input_top_logprobs")
        if not isinstance(tops, list) or len(tops) < n:
            raise EngineError("SGLang answer lacks input_top_logprobs")
        for r, row in enumerate(tops[len(tops) - n:]):
            trip = _triples(row or [], "input_top_logprobs")
            if len(trip) < top_k or any(lp is None for lp, _ in trip[:top_k]):
                raise EngineError(f"SGLang returned {len(trip)} top log-probs where {top_k} were asked")
            top_lp[r] = torch.tensor([lp for lp, _ in trip[:top_k]])
            top_ids[r] = torch.tensor([t for _, t in trip[:top_k]])
    return ScoreOutput(start, torch.tensor(tok, dtype=torch.float32), top_ids, top_lp)
