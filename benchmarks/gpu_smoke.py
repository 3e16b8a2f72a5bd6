"""Smoke test of the engines on a GPU machine with an SGLang or vLLM server and a real Qwen3 checkpoint.

Not run by the test suite (it needs a GPU, the server package and model weights). See docs/GPU.md::

    # a server you started yourself (see docs/GPU.md for the flags)
    python benchmarks/gpu_smoke.py --model /models/Qwen3-4B --url http://127.0.0.1:30000
    # or let the script start one (and stop it at the end)
    python benchmarks/gpu_smoke.py --model /models/Qwen3-4B --launch --port 30000
    # the same checks against vLLM (VLLMEngine); --launch starts vllm.entrypoints.openai.api_server
    python benchmarks/gpu_smoke.py --server vllm --model /models/Qwen3-4B --launch --port 8000

Checks, each reported as PASS/FAIL/SKIP with numbers, JSON summary at the end (exit code 1 on
any FAIL). First, where CUDA is (``--device-check auto``; ``on``/``off`` force it):

0. device_memory: ``gpu_device_check.py --only memory`` in its own process, before a server takes the
   GPU: a GRPO and an LOPD step at Qwen3-4B's shape (2 layers, its vocabulary, bf16) at 1k and 4k tokens,
   each peak beside the memory model's prediction (PASS within 20%).

``--server sglang`` (the default):

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

``--server vllm`` (:class:`harness.engines.vllm.VLLMEngine`; the HF comparisons need the model
in-process, on the GPU when there is one, ``--no-hf`` skips them):

1. server: /health, /version, /v1/models (served name, the path it loaded, max_model_len);
2. generate: greedy decode from a shop prompt (token ids), log-probs present;
3. greedy vs HF: the HF engine's greedy decode of the same prompt, token for token (float32: all
   tokens equal; bfloat16, whose kernels differ between engines: a common prefix of at least
   ``--min-prefix`` tokens with log-probs within ``--tol``); and a continuation of prompt + decode;
4. top-20 scores vs HF (``prompt_logprobs``): token and top-20 log-probs within ``--tol``, the same
   top-1 wherever HF's top-2 margin exceeds 2 x ``--tol``;
5. sampled log-probs (temperature 0.7, top-k 20) are the model's raw ones: against the server's own
   scores and HF's of the sampled sequence;
6. prompt embeds: generation with an embedding override equal to the tokens' own embeddings gives the
   token-id path's greedy decode; scoring under it is reported as vLLM's known limit (the client's
   ``VLLMFeatureError``: PASS with the message) or, should a vLLM support it, checked against the
   token-id scores;
7. a token-in/token-out rollout of 4 shop episodes through the server;
8. weight update: every weight perturbed in-process (``--perturb`` x its tensor's std), written untied
   with ``harness.engines.server.write_sync_checkpoint`` (as the trainer syncs), reloaded through
   /collective_rpc (needs ``VLLM_SERVER_DEV_MODE=1``): the server's scores of a fixed sequence move
   to the perturbed model's (within ``--tol``); then the unperturbed weights are reloaded the same way.
   With ``--no-hf``: a reload of ``--model`` itself, the greedy decode unchanged.
9. weight sync in memory: the same, the weights broadcast into the server's receiver extension
   (``harness.engines.weight_sync``; NCCL from a GPU, gloo from a CPU), no folder.

``--launch`` with ``--server vllm`` starts ``python -m vllm.entrypoints.openai.api_server`` with
``VLLM_SERVER_DEV_MODE=1`` through :func:`harness.engines.server.open_servers` (the trainer's own
launcher: ``--enable-prompt-embeds``, its log in ``--work``), from an untied copy of ``--model``, as
the trainer launches; ``--python`` picks the interpreter that has vLLM. Without a GPU it adds the CPU
backend's arguments, so the checks also run on the CPU vLLM server (``make vllm``) with a small
model, e.g. the pinned base: ``--server vllm --model harness/pinned_base --launch``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.engines import EmbedOverride, HFEngine, SamplingParams, SGLangEngine  # noqa: E402
from harness.engines.http import ServerFeatureError  # noqa: E402
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
            except ServerFeatureError as e:  # SGLang's or vLLM's: the server lacks what the check needs
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


# ---- vLLM (--server vllm) ------------------------------------------------------------------------
def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def eos_token_ids(model_dir: Path, tok) -> list[int]:
    """The ids the server stops on by default: the checkpoint's generation config (Qwen3's end tokens otherwise)."""
    try:
        eos = json.loads((model_dir / "generation_config.json").read_text()).get("eos_token_id")
    except (OSError, ValueError):
        eos = None
    if eos is None:
        eos = [tok.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
    return [int(t) for t in ([eos] if isinstance(eos, int) else eos) if isinstance(t, int)]


@check("server")
def check_vllm_server(eng):
    eng.health()
    models = eng.models()
    return {"version": eng.version(), "model": eng.model,
            "loaded": [m.get("root") for m in models], "max_model_len": [m.get("max_model_len") for m in models]}


@check("greedy_vs_hf")
def check_vllm_greedy(eng, hf, prompt, state, tol, min_prefix, exact):
    sp = SamplingParams(temperature=0, max_new_tokens=64)
    srv, ref = state["greedy"], hf.generate([prompt], sp)[0]
    n = common_prefix(srv.token_ids, ref.token_ids)
    equal = srv.token_ids == ref.token_ids
    d = max_diff(srv.logprobs[:n], ref.logprobs[:n])
    # Multi-turn: continuing prompt + decode token in / token out gives HF's continuation too.
    cont = prompt + ref.token_ids
    a, b = eng.generate([cont], sp)[0], hf.generate([cont], sp)[0]
    cont_n = common_prefix(a.token_ids, b.token_ids)
    if exact:
        ok = equal and a.token_ids == b.token_ids and d <= tol
    else:
        ok = n >= min(min_prefix, len(ref.token_ids)) and cont_n >= min(min_prefix, len(b.token_ids)) and d <= tol
    return {"status": "PASS" if ok else "FAIL", "criterion": "token for token" if exact else
            f"common prefix >= {min_prefix} (bfloat16)", "equal": equal, "common_greedy_prefix": n,
            "tokens": [len(srv.token_ids), len(ref.token_ids)], "max_abs_diff": d,
            "continuation_equal": a.token_ids == b.token_ids, "continuation_common_prefix": cont_n}


@check("top20_scores_vs_hf")
def check_vllm_scores(eng, hf, prompt, state, tol):
    seq = prompt + state["greedy"].token_ids
    a = hf.score([seq], top_k=20, start=len(prompt))[0]
    b = eng.score([seq], top_k=20, start=len(prompt))[0]
    d_tok = (a.token_logprobs.double() - b.token_logprobs.double()).abs().max().item()
    d_top = (a.topk_logprobs.double() - b.topk_logprobs.double()).abs().max().item()
    # Top-1 must agree wherever HF's ranking is not a near-tie (a margin over 2 x tol to its runner-up).
    clear = (a.topk_logprobs[:, 0] - a.topk_logprobs[:, 1]) > 2 * tol
    top1 = bool((a.topk_ids[clear, 0] == b.topk_ids[clear, 0]).all())
    top5 = (a.topk_ids[:, :5] == b.topk_ids[:, :5]).float().mean().item()
    ok = d_tok <= tol and d_top <= tol and top1
    return {"status": "PASS" if ok else "FAIL", "positions": len(a.token_logprobs), "token_max_abs_diff": d_tok,
            "top20_max_abs_diff": d_top, "top1_agrees_off_ties": top1, "top5_ids_equal_fraction": top5}


@check("sampled_logprobs")
def check_vllm_sampled(eng, hf, prompt, tol):
    out = eng.generate([prompt], SamplingParams(temperature=0.7, top_k=20, max_new_tokens=32, seed=3))[0]
    seq = prompt + out.token_ids
    own = eng.score([seq], top_k=0, start=len(prompt))[0].token_logprobs.tolist()
    info = {"tokens": len(out.token_ids), "vs_server_scores_max_abs_diff": max_diff(out.logprobs, own)}
    ok = info["vs_server_scores_max_abs_diff"] <= tol
    if hf is not None:
        ref = hf.score([seq], top_k=0, start=len(prompt))[0].token_logprobs.tolist()
        info["vs_hf_max_abs_diff"] = max_diff(out.logprobs, ref)
        ok = ok and info["vs_hf_max_abs_diff"] <= tol
    return {"status": "PASS" if ok and out.token_ids else "FAIL", **info}


@check("prompt_embeds")
def check_vllm_embeds(eng, prompt, emb, tol):
    from harness.engines.vllm import VLLMFeatureError

    pos = [2, 3]  # the tokens' own embeddings: the same prompt through the embedding path
    ov = EmbedOverride(pos, emb[torch.tensor([prompt[p] for p in pos])].float())
    sp = SamplingParams(temperature=0, max_new_tokens=32)
    a, b = eng.generate([prompt], sp)[0], eng.generate([prompt], sp, overrides=[ov])[0]
    n = common_prefix(a.token_ids, b.token_ids)
    info = {"generate_same_greedy_decode": a.token_ids == b.token_ids, "generate_common_prefix": n,
            "generate_max_abs_diff": max_diff(a.logprobs[:n], b.logprobs[:n])}
    ok = info["generate_same_greedy_decode"] and info["generate_max_abs_diff"] <= tol
    seq = prompt + a.token_ids
    try:
        sb = eng.score([seq], top_k=5, start=len(prompt), overrides=[ov])[0]
    except VLLMFeatureError as e:
        info["scoring_under_overrides"] = f"refused, as documented: {e}"[:400]
    else:
        sa = eng.score([seq], top_k=5, start=len(prompt))[0]
        d = (sa.token_logprobs - sb.token_logprobs).abs().max().item()
        info["scoring_under_overrides"] = f"SUPPORTED by this vLLM (max |diff| {d:.3g}): update VLLMEngine's docs"
        ok = ok and d <= tol
    return {"status": "PASS" if ok else "FAIL", **info}


@check("weight_update")
def check_vllm_update(eng, hf, tok, prompt, state, base: Path | None, model_dir: Path, work: Path, scale, tol):
    """New weights through a checkpoint folder (``engine.weight_sync=disk``)."""
    return _update(eng, hf, tok, prompt, state, base, model_dir, work, scale, tol, in_memory=False)


@check("weight_sync_in_memory")
def check_vllm_sync(eng, hf, tok, prompt, state, base: Path | None, model_dir: Path, work: Path, scale, tol):
    """New weights in memory (``engine.weight_sync=collective``): NCCL from the GPU, gloo from a CPU."""
    if hf is None:
        return {"status": "SKIP", "why": "needs the in-process model (--no-hf given)"}
    backend = "nccl" if hf.model.device.type == "cuda" else "gloo"
    t = time.perf_counter()
    eng.connect_weight_sync(backend=backend)
    connect_s = time.perf_counter() - t
    try:
        out = _update(eng, hf, tok, prompt, state, base, model_dir, work, scale, tol, in_memory=True)
    finally:
        eng.disconnect_weight_sync()
    return {**out, "backend": backend, "connect_seconds": round(connect_s, 2)}


def _update(eng, hf, tok, prompt, state, base, model_dir, work, scale, tol, *, in_memory: bool) -> dict:
    """Perturb the in-process model, sync the server to it, compare their scores, put the server back."""
    from harness.engines.server import write_sync_checkpoint

    sp = SamplingParams(temperature=0, max_new_tokens=32)
    if hf is None:  # no in-process model: reload the checkpoint itself, nothing may change
        before = eng.generate([prompt], sp)[0].token_ids
        eng.update_weights(str(model_dir.resolve()))
        after = eng.generate([prompt], sp)[0].token_ids
        return {"status": "PASS" if before == after else "FAIL", "reloaded": str(model_dir),
                "same_greedy_decode": before == after}
    seq = prompt + state["greedy"].token_ids
    start = len(prompt)
    before = eng.score([seq], top_k=0, start=start)[0].token_logprobs.double()
    model = hf.model
    with torch.no_grad():
        for i, prm in enumerate(model.parameters()):  # tied embedding/head included once
            g = torch.Generator(device=prm.device).manual_seed(i)
            noise = torch.randn(prm.shape, generator=g, device=prm.device, dtype=torch.float32)
            prm.add_((scale * prm.float().std().nan_to_num(0.0) * noise).to(prm.dtype))
    hf.clear_cache()
    want = hf.score([seq], top_k=0, start=start)[0].token_logprobs.double()
    t = time.perf_counter()  # the folder's write counts: it is the path's cost
    if in_memory:
        eng.update_weights(model.state_dict())
    else:
        eng.update_weights(str(write_sync_checkpoint(model, model.state_dict(), tok, work / "perturbed").resolve()))
    reload_s = time.perf_counter() - t
    try:
        got = eng.score([seq], top_k=0, start=start)[0].token_logprobs.double()
    finally:
        if base is not None:
            eng.update_weights(str(base.resolve()))  # the unperturbed weights, untied
    gap = (got - want).abs().max().item()
    moved = (got - before).abs().max().item()
    restored = eng.score([seq], top_k=0, start=start)[0].token_logprobs.double() if base is not None else None
    back = (restored - before).abs().max().item() if restored is not None else float("nan")
    ok = gap <= tol and moved > 4 * max(gap, tol) and (restored is None or back <= tol)
    return {"status": "PASS" if ok else "FAIL", "sync_seconds": round(reload_s, 2),
            "scores_moved_by": moved, "gap_to_perturbed_hf": gap, "after_restore_gap": back}


def main_vllm(args) -> None:
    """The vLLM checks (RESULTS); a server launched here is closed at the end."""
    from harness.engines.server import EngineConfig, _VLLM_VENV_PYTHON, open_servers, write_sync_checkpoint
    from harness.engines.vllm import VLLMEngine

    gpu = torch.cuda.is_available()
    dtype = args.dtype if args.dtype != "auto" else ("bfloat16" if gpu else "float32")
    tmp = None if args.work else tempfile.TemporaryDirectory(prefix="gpu-smoke-")
    work = Path(args.work or tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    tok = load_tokenizer(args.model)
    eos = eos_token_ids(args.model, tok)
    emb = embedding_matrix(args.model)
    hf = None
    if not args.no_hf:
        hf = HFEngine.from_pretrained(args.model, dtype=getattr(torch, dtype), device="cuda" if gpu else "cpu")
        hf.model.eval()
    # The trainer's form: a server launched from (and synced with) untied checkpoints.
    base = write_sync_checkpoint(hf.model, hf.model.state_dict(), tok, work / "base") if hf is not None else None
    pool = None
    try:
        if args.launch:
            python = args.python or (str(_VLLM_VENV_PYTHON) if _VLLM_VENV_PYTHON.exists() else sys.executable)
            ec = EngineConfig(kind="vllm", launch=1, port=args.port, python=python,
                              startup_timeout=args.launch_timeout,
                              extra_args=["--gpu-memory-utilization", str(args.mem_fraction)] if gpu else [])
            t = time.perf_counter()
            pool = open_servers(ec, model_dir=str(base or args.model), log_dir=work / "logs", eos_token_ids=eos,
                                dtype=dtype, gpu=gpu, embedding=emb)
            print(f"vLLM server up in {time.perf_counter() - t:.0f} s; log {pool.servers[0].log}", flush=True)
            eng = pool.engines[0]
        else:
            eng = VLLMEngine(args.url, eos_token_ids=eos, embedding=emb)
        prompt = shop_prompt(tok)
        state: dict = {}
        check_vllm_server(eng)
        check_generate(eng, tok, prompt, state)
        if "greedy" in state and hf is not None:
            check_vllm_greedy(eng, hf, prompt, state, args.tol, args.min_prefix, exact=dtype == "float32")
            check_vllm_scores(eng, hf, prompt, state, args.tol)
        check_vllm_sampled(eng, hf, prompt, args.tol)
        check_vllm_embeds(eng, prompt, emb, args.tol)
        check_rollout(eng, tok)
        if "greedy" in state:
            check_vllm_update(eng, hf, tok, prompt, state, base, args.model, work, args.perturb, args.tol)
            check_vllm_sync(eng, hf, tok, prompt, state, base, args.model, work, args.perturb, args.tol)
    finally:
        if pool is not None:
            pool.close()
        if tmp is not None:
            tmp.cleanup()


def main_sglang(args) -> None:
    """The SGLang checks (RESULTS); a server launched here is stopped at the end."""
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


@check("device_memory")
def check_device(args) -> dict:
    """``gpu_device_check.py --only memory`` in its own process, before any server takes the GPU: GRPO and
    LOPD steps at Qwen3-4B's width on the device, their peaks against the memory model's predictions."""
    out = Path(args.work or tempfile.gettempdir()) / "gpu_device_check.json"
    cmd = [sys.executable, str(Path(__file__).with_name("gpu_device_check.py")), "--only", "memory", "--out", str(out),
           "--work", str(out.parent / "device-check")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.device_timeout)
    if not out.is_file():
        raise RuntimeError(f"gpu_device_check.py exited {r.returncode}: {r.stdout[-300:]} {r.stderr[-600:]}")
    mem = json.loads(out.read_text())["memory"]
    cases = {k: {f: v.get(f) for f in ("peak_above_gib", "predicted_gib", "predicted_over_measured", "seconds",
                                       "error") if f in v} for k, v in mem.items() if isinstance(v, dict)}
    return {"status": "PASS" if r.returncode == 0 and mem.get("pass") else "FAIL", "device": json.loads(
        out.read_text())["device"], "layers": mem.get("layers"), "cases": cases, "file": str(out)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="GPU smoke test of a server engine (SGLang or vLLM) and the HF engine.")
    ap.add_argument("--server", choices=("sglang", "vllm"), default="sglang", help="which server to check")
    ap.add_argument("--model", required=True, type=Path, help="local Qwen3 checkpoint directory")
    ap.add_argument("--url", default=None, help="a running server (default: http://127.0.0.1:PORT)")
    ap.add_argument("--port", type=int, default=None, help="default 30000 (sglang), 8000 (vllm)")
    ap.add_argument("--launch", action="store_true", help="start the server here (and stop it at the end)")
    ap.add_argument("--launch-timeout", type=int, default=900)
    ap.add_argument("--mem-fraction", type=float, default=0.6,
                    help="GPU memory share of a launched server (sglang --mem-fraction-static, "
                         "vllm --gpu-memory-utilization)")
    ap.add_argument("--tol", type=float, default=0.05, help="log-prob tolerance (bf16 on GPU)")
    ap.add_argument("--no-hf", action="store_true", help="skip the HF-engine comparison")
    ap.add_argument("--dtype", default="auto", choices=("auto", "bfloat16", "float16", "float32"),
                    help="vllm: dtype of the launched server and the HF model "
                         "(auto: bfloat16 on a GPU, float32 on CPU)")
    ap.add_argument("--python", default=None,
                    help="vllm --launch: the interpreter with vLLM "
                         "(default .venv-vllm/bin/python when built, else this one)")
    ap.add_argument("--min-prefix", type=int, default=8,
                    help="vllm in bfloat16: common greedy prefix with HF that passes (float32 needs all tokens)")
    ap.add_argument("--perturb", type=float, default=0.05,
                    help="vllm weight-update check: noise added to each weight, times its tensor's std")
    ap.add_argument("--work", default=None, help="vllm: where the untied checkpoints and the server log go "
                                                 "(default: a temporary directory)")
    ap.add_argument("--device-check", choices=("auto", "on", "off"), default="auto",
                    help="first run gpu_device_check.py's memory check (shapes and the memory model on the "
                         "device; auto: when CUDA is there)")
    ap.add_argument("--device-timeout", type=int, default=300)
    ap.add_argument("--out", default="gpu_smoke.json")
    args = ap.parse_args(argv)
    args.port = args.port or (8000 if args.server == "vllm" else 30000)
    args.url = args.url or f"http://127.0.0.1:{args.port}"
    if args.server == "vllm" and args.launch and args.url != f"http://127.0.0.1:{args.port}":
        ap.error("--launch starts the server on 127.0.0.1:--port; give --port, not --url")
    if args.device_check == "on" or (args.device_check == "auto" and torch.cuda.is_available()):
        check_device(args)
    (main_vllm if args.server == "vllm" else main_sglang)(args)
    Path(args.out).write_text(json.dumps({"server": args.server, "model": str(args.model), "url": args.url,
                                          "host": os.uname().nodename, "results": RESULTS}, indent=2))
    failed = [r["check"] for r in RESULTS if r["status"] == "FAIL"]
    print(f"{len(RESULTS) - len(failed)}/{len(RESULTS)} checks without failure; details in {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
