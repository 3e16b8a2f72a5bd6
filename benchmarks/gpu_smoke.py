"""Smoke test of the engines on a GPU machine with SGLang and a real Qwen3 checkpoint.

Not run by the test suite (it needs a GPU, SGLang and model weights). See docs/GPU.md::

    # a server you started yourself (see docs/GPU.md for the flags)
    python benchmarks/gpu_smoke.py --model /models/Qwen3-4B --url http://127.0.0.1:30000
    # or let the script start one (and stop it at the end)
    python benchmarks/gpu_smoke.py --model /models/Qwen3-4B --launch --port 30000

Checks, each reported as PASS/FAIL/SKIP with numbers, JSON summary at the end (exit code 1 on
any FAIL):

1. server: /health, version, /get_model_info;
2. generate: greedy decode from a tool-use prompt (input_ids), log-probs present;
3. score: the server's teacher-forced log-probs of its own greedy continuation match the
   generation log-probs (bf16 tolerance);
4. latent injection on the server: latents = the embeddings of real tokens; the token-id path and
   the input_embeds path (and positional overrides, when the server takes them) give the same
   greedy decode and close log-probs; needs --disable-radix-cache for input_embeds;
5. HF engine on the same GPU (unless --no-hf): greedy decode and log-probs against the server;
6. a token-in/token-out rollout of 4 shop episodes through the server;
7. /update_weights_from_disk with the same checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.engines import EmbedOverride, HFEngine, SamplingParams, SGLangEngine  # noqa: E402
from harness.engines.sglang import SGLangFeatureError  # noqa: E402
from harness.models import load_tokenizer  # noqa: E402
from harness.rollout import render_prompt, rollout  # noqa: E402
from lopd.latent import encode_with_latents, frame_user_message, placeholder_token_id  # noqa: E402

RESULTS: list[dict] = []


def check(name):
    def wrap(fn):
        def run(*a, **k):
            t = time.perf_counter()
            try:
                info = fn(*a, **k) or {}
                status = info.pop("status", "PASS")
            except SGLangFeatureError as e:
                status, info = "SKIP", {"reason": str(e)}
            except Exception as e:  # report and go on with the other checks
                status, info = "FAIL", {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]}
            info["seconds"] = round(time.perf_counter() - t, 2)
            RESULTS.append({"check": name, "status": status, **info})
            print(f"[{status}] {name}: " + json.dumps({k: v for k, v in info.items() if k != "trace"})[:600],
                  flush=True)
        return run
    return wrap


def embedding_matrix(model_dir: Path) -> torch.Tensor:
    """model.embed_tokens.weight straight from the safetensors shards (no full model load)."""
    from safetensors import safe_open

    for f in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as st:
            for key in st.keys():
                if key.endswith("embed_tokens.weight"):
                    return st.get_tensor(key)
    raise FileNotFoundError(f"no embed_tokens.weight in {model_dir}")


def shop_prompt(tok) -> list[int]:
    import gymnasium as gym

    import envs  # noqa: F401

    env = gym.make("lopd/shop-v0")
    _, info = env.reset(seed=0, options={"task_id": "apples"})
    return render_prompt(tok, info["messages"], enable_thinking=False)


def max_diff(a, b) -> float:
    return max((abs(x - y) for x, y in zip(a, b)), default=0.0)


@check("server")
def check_server(eng: SGLangEngine):
    eng.health()
    return {"version": eng.version(), "model": eng.model_info().get("model_path")}


@check("generate")
def check_generate(eng, tok, prompt, state):
    out = eng.generate([prompt], SamplingParams(temperature=0, max_new_tokens=64))[0]
    state["greedy"] = out
    ok = len(out.token_ids) > 0 and len(out.logprobs) == len(out.token_ids)
    return {"status": "PASS" if ok else "FAIL", "tokens": len(out.token_ids), "finish": out.finish_reason,
            "text": tok.decode(out.token_ids)[:200]}


@check("score")
def check_score(eng, prompt, state, tol):
    out = state["greedy"]
    ids = [t for t in out.token_ids]
    sc = eng.score([prompt + ids], top_k=20, start=len(prompt))[0]
    d = max_diff(sc.token_logprobs.tolist(), out.logprobs)
    top1 = (sc.topk_ids[:, 0] == torch.tensor(ids)).float().mean().item()
    return {"status": "PASS" if d <= tol and top1 == 1.0 else "FAIL", "max_abs_diff": d, "greedy_is_top1": top1}


@check("latent_equivalence")
def check_latents(eng, tok, emb, mode, tol):
    messages = [{"role": "user", "content": frame_user_message("Buy 2 apples, then pay.")}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, enable_thinking=False)
    enc = encode_with_latents(tok, text, 16, placeholder_id=placeholder_token_id(tok))
    real = tok.encode(" apple pear milk checkout price cart order refund user", add_special_tokens=False)[:16]
    real = (real * 16)[:16]
    ids = list(enc.ids)
    for p, t in zip(enc.positions, real):
        ids[p] = t
    ov = EmbedOverride(enc.positions, emb[real].float())
    eng.override_mode = mode
    sp = SamplingParams(temperature=0, max_new_tokens=32)
    a = eng.generate([ids], sp)[0]
    b = eng.generate([enc.ids], sp, overrides=[ov])[0]
    same = a.token_ids == b.token_ids
    d = max_diff(a.logprobs, b.logprobs)
    sa = eng.score([ids + a.token_ids], top_k=20, start=len(ids))[0]
    sb = eng.score([enc.ids + a.token_ids], top_k=20, start=len(ids), overrides=[ov])[0]
    ds = (sa.token_logprobs - sb.token_logprobs).abs().max().item()
    ok = same and d <= tol and ds <= tol
    return {"status": "PASS" if ok else "FAIL", "mode": mode, "same_greedy_decode": same,
            "generate_max_abs_diff": d, "score_max_abs_diff": ds}


@check("hf_engine_vs_server")
def check_hf(eng, tok, model_dir, prompt, state, tol):
    hf = HFEngine.from_pretrained(model_dir, dtype=torch.bfloat16, device="cuda")
    out = hf.generate([prompt], SamplingParams(temperature=0, max_new_tokens=64))[0]
    srv = state["greedy"]
    n = 0
    while n < min(len(out.token_ids), len(srv.token_ids)) and out.token_ids[n] == srv.token_ids[n]:
        n += 1
    d = max_diff(out.logprobs[:n], srv.logprobs[:n])
    del hf
    torch.cuda.empty_cache()
    # bf16 kernels differ between engines; a long common greedy prefix and close log-probs pass.
    return {"status": "PASS" if n >= 8 and d <= tol else "FAIL", "common_greedy_prefix": n, "max_abs_diff": d}


@check("rollout")
def check_rollout(eng, tok):
    import gymnasium as gym

    import envs  # noqa: F401
    from harness.rollout import RolloutConfig

    env_list = [gym.make("lopd/shop-v0") for _ in range(4)]
    trajs = rollout(env_list, eng, tok, seeds=[0, 1, 2, 3],
                    sampling=SamplingParams(temperature=0.7, top_p=0.95, top_k=20, max_new_tokens=512),
                    config=RolloutConfig(template_kwargs={"enable_thinking": False}))
    rewards = [t.episode.reward for t in trajs]
    ok = all(len(t.token_ids) == len(t.loss_mask) and sum(t.loss_mask) > 0 for t in trajs)
    return {"status": "PASS" if ok else "FAIL", "rewards": rewards,
            "steps": [len(t.episode.steps) for t in trajs], "tokens": [len(t.token_ids) for t in trajs]}


@check("update_weights_from_disk")
def check_update(eng, model_dir):
    eng.update_weights(str(model_dir))
    return {}


def launch(args) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(args.model), "--port", str(args.port),
           "--host", "127.0.0.1", "--dtype", "bfloat16", "--disable-radix-cache", "--mem-fraction-static",
           str(args.mem_fraction)]
    print("launching:", " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=sys.stderr, stderr=sys.stderr)
    eng = SGLangEngine(args.url, timeout=10)
    deadline = time.time() + args.launch_timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"sglang.launch_server exited with code {proc.returncode}")
        try:
            eng.health()
            return proc
        except Exception:  # not up yet
            time.sleep(5)
    proc.terminate()
    raise SystemExit(f"the server did not come up within {args.launch_timeout} s")


def main() -> int:
    ap = argparse.ArgumentParser(description="GPU smoke test of the SGLang and HF engines.")
    ap.add_argument("--model", required=True, type=Path, help="local Qwen3 checkpoint directory")
    ap.add_argument("--url", default=None)
    ap.add_argument("--port", type=int, default=30000)
    ap.add_argument("--launch", action="store_true", help="start sglang.launch_server here")
    ap.add_argument("--launch-timeout", type=int, default=900)
    ap.add_argument("--mem-fraction", type=float, default=0.6)
    ap.add_argument("--tol", type=float, default=0.05, help="log-prob tolerance (bf16 on GPU)")
    ap.add_argument("--no-hf", action="store_true", help="skip the HF-engine comparison")
    ap.add_argument("--out", default="gpu_smoke.json")
    args = ap.parse_args()
    args.url = args.url or f"http://127.0.0.1:{args.port}"
    proc = launch(args) if args.launch else None
    try:
        tok = load_tokenizer(args.model)
        eos = [t for t in (tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>"))
               if isinstance(t, int)]
        emb = embedding_matrix(args.model)
        eng = SGLangEngine(args.url, eos_token_ids=eos, embedding=emb)
        prompt = shop_prompt(tok)
        state: dict = {}
        check_server(eng)
        check_generate(eng, tok, prompt, state)
        if "greedy" in state:
            check_score(eng, prompt, state, args.tol)
        for mode in ("input_embeds", "positional"):
            check_latents(eng, tok, emb, mode, args.tol)
        eng.override_mode = "input_embeds"
        if not args.no_hf and torch.cuda.is_available() and "greedy" in state:
            check_hf(eng, tok, args.model, prompt, state, args.tol)
        check_rollout(eng, tok)
        check_update(eng, args.model)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=60)
    Path(args.out).write_text(json.dumps({"model": str(args.model), "url": args.url, "host": os.uname().nodename,
                                          "results": RESULTS}, indent=2))
    failed = [r["check"] for r in RESULTS if r["status"] == "FAIL"]
    print(f"{len(RESULTS) - len(failed)}/{len(RESULTS)} checks without failure; details in {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
