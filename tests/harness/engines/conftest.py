import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from harness.models import build_tiny_model


@pytest.fixture(scope="session")
def tiny():
    """(model, tokenizer) of the 1M preset, float64 (the engines' paths then differ by rounding
    far below any test's tolerance on any CPU), fixed seed."""
    model, tok = build_tiny_model("1m", seed=0)
    return model.double(), tok


@pytest.fixture(scope="session")
def prompts():
    g = torch.Generator().manual_seed(0)
    return [torch.randint(10, 900, (n,), generator=g).tolist() for n in (5, 17, 9, 12)]


@pytest.fixture(autouse=True)
def _one_thread_here(one_thread):
    """Every test in this folder runs on one torch thread (tests/conftest.py)."""


# ---- a fake SGLang server ---------------------------------------------------------------
# A tiny local HTTP server that records requests and answers like SGLang's native API.
#
# It checks request fields against SGLang's documented ``/generate`` parameters (GenerateReqInput
# and SamplingParams) and answers in the documented shapes (``meta_info`` with
# ``[logprob, token_id, text]`` triples). It tests the requests we build and our parsing of
# documented responses; it says nothing about whether a real server behaves the same.


GENERATE_FIELDS = {
    "text", "input_ids", "input_embeds", "sampling_params", "rid", "return_logprob", "logprob_start_len",
    "top_logprobs_num", "token_ids_logprob", "return_text_in_logprobs", "stream", "positional_embed_overrides",
}
SAMPLING_FIELDS = {
    "max_new_tokens", "stop", "stop_token_ids", "temperature", "top_p", "top_k", "min_p", "ignore_eos",
    "skip_special_tokens", "no_stop_trim", "sampling_seed", "n",
}


def lp(pos: int, tok: int) -> float:
    """The fake model's log-prob of ``tok`` at position ``pos`` (deterministic, negative)."""
    return -0.01 * pos - 0.001 * tok - 0.1


class FakeSGLang:
    def __init__(self, *, info_path="/get_server_info", accept_positional=True, update_ok=True):
        self.requests: list[tuple[str, str, object]] = []
        self.info_path, self.accept_positional, self.update_ok = info_path, accept_positional, update_ok
        self.finish = {"type": "length", "matched": None}
        self.misalign = False
        self.reject_code = 400  # FastAPI's validation errors are 422
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, obj):
                body = b"" if obj is None else json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                fake.requests.append(("GET", self.path, None))
                if self.path == "/health":
                    return self._send(200, None)
                if self.path == fake.info_path:
                    return self._send(200, {"version": "0.5.4", "model_path": "Qwen/Qwen3-8B"})
                if self.path == "/get_model_info":
                    return self._send(200, {"model_path": "Qwen/Qwen3-8B", "is_generation": True})
                self._send(404, {"detail": "Not Found"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"null")
                fake.requests.append(("POST", self.path, body))
                if self.path == "/update_weights_from_disk":
                    ok = fake.update_ok
                    return self._send(200, {"success": ok, "message": "Succeeded to update model weights." if ok
                                            else "Failed to get weights iterator: bad path."})
                if self.path == "/flush_cache":
                    return self._send(200, None)
                if self.path != "/generate":
                    return self._send(404, {"detail": "Not Found"})
                unknown = set(body) - GENERATE_FIELDS
                unknown |= set(body.get("sampling_params", {})) - SAMPLING_FIELDS
                if unknown:
                    return self._send(400, {"error": {"message": f"unknown fields {sorted(unknown)}"}})
                if "positional_embed_overrides" in body and not fake.accept_positional:
                    return self._send(fake.reject_code,
                                      {"error": {"message": "positional_embed_overrides: invalid type"}})
                self._send(200, fake.answer(body))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def answer(self, body):
        if "input_ids" in body:
            single = not isinstance(body["input_ids"][0], list)
            batch = [body["input_ids"]] if single else body["input_ids"]
        else:  # the server does not know the ids behind embeddings: it sees placeholders
            single = not isinstance(body["input_embeds"][0][0], list)
            embeds = [body["input_embeds"]] if single else body["input_embeds"]
            batch = [[0] * len(e) for e in embeds]
        out = [self.one(ids, body, i) for i, ids in enumerate(batch)]
        return out[0] if single else out

    def one(self, ids, body, row):
        sp = body.get("sampling_params", {})
        n = sp.get("max_new_tokens", 128)
        gen = [(sum(ids) + 7 * k) % 97 + 3 for k in range(n)]
        meta = {"id": f"r{row}", "finish_reason": self.finish if n else {"type": "length", "matched": None},
                "prompt_tokens": len(ids), "completion_tokens": n, "cached_tokens": 0}
        if body.get("return_logprob"):
            meta["output_token_logprobs"] = [[lp(len(ids) + k, t), t, None] for k, t in enumerate(gen)]
            # As SGLang's scheduler does: entries from logprob_start_len on, the first padded with
            # None (the logits before it are not computed).
            start = body.get("logprob_start_len", -1)
            if start is not None and start >= 0:
                toks = list(ids)
                if self.misalign:
                    toks = [t + 1 for t in toks]
                meta["input_token_logprobs"] = [[None if p == start else lp(p, toks[p]), toks[p], None]
                                                for p in range(start, len(ids))]
                k = body.get("top_logprobs_num") or 0
                if k:
                    meta["input_top_logprobs"] = [None if p == start else [[lp(p, c), c, None] for c in range(k)]
                                                  for p in range(start, len(ids))]
                want = body.get("token_ids_logprob")
                if want:
                    want_row = want[row] if isinstance(want[0], list) else want
                    meta["input_token_ids_logprobs"] = [None if p == start else [[lp(p, c), c, None] for c in want_row]
                                                        for p in range(start, len(ids))]
        return {"text": " ".join(map(str, gen)), "output_ids": gen, "meta_info": meta}


@pytest.fixture
def fake():
    f = FakeSGLang()
    yield f
    f.close()


@pytest.fixture
def fake_factory():
    made = []

    def make(**kw):
        made.append(FakeSGLang(**kw))
        return made[-1]
    yield make
    for f in made:
        f.close()
