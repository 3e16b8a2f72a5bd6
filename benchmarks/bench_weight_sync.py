"""Seconds per weight sync to a real vLLM server: through the sync folder vs in memory (collective RPC, gloo).

    .venv/bin/python benchmarks/bench_weight_sync.py --layers 2 --out benchmarks/results/weight_sync.json

The model is ``--layers`` layers of Qwen3-4B's shape with its vocabulary (random weights, fp32:
``harness.models.shapes.save_shape``), served by the CPU vLLM server (``make vllm``). Each round perturbs
the weights, syncs them one way, and checks that the server's log-probs on a probe are the new
model's (``probe_gap`` within ``--tolerance``), so a sync that did not take effect is not timed as one.
The folder path is what the trainer did before: ``write_sync_checkpoint`` (safetensors, untied head)
then ``reload_weights(weights_path=...)``; the in-memory path is ``CollectiveSync.send``: a broadcast of
the same tensors over a gloo group into the server's ``reload_weights(weights_iterator=...)``. Both
end with the prefix-cache reset. Reported: the median of ``--rounds`` rounds each, and the bytes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.run_meta import run_meta  # noqa: E402


def perturb(model, seed: int) -> None:
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1e-3 * torch.randn(p.shape, generator=g))


def timed_rounds(pool, model, tok, probe, rounds: int, how: str, work: Path, tol: float) -> list[float]:
    """``rounds`` syncs of freshly perturbed weights; each one's seconds (the check after it not counted)."""
    from harness.engines.hf import HFEngine
    from harness.engines.server import probe_gap, write_sync_checkpoint

    out = []
    for r in range(rounds):
        perturb(model, seed=100 * (how == "memory") + r)
        t0 = time.perf_counter()
        if how == "folder":
            pool.update_weights(str(write_sync_checkpoint(model, model.state_dict(), tok, work / "sync")))
        else:
            pool.update_weights(model.state_dict())
        out.append(time.perf_counter() - t0)
        gap = probe_gap(pool.engines[0], HFEngine(model, tok), probe)
        if gap > tol:
            raise SystemExit(f"{how} sync round {r}: the server is {gap:.3g} nats from the model (> {tol})")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=None, help="embedding rows (default Qwen3's 151,936)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tolerance", type=float, default=1e-3, help="largest mean |log p| gap after a sync (nats)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)

    import torch

    from harness.models.shapes import save_shape
    from harness.engines.server import EngineConfig, open_servers, write_sync_checkpoint
    from harness.models import load_model
    from harness.engines.weight_sync import free_port

    work = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    try:
        save_shape(work / "shape", args.layers, vocab=args.vocab, dtype="float32")
        model, tok = load_model(str(work / "shape"), dtype=torch.float32)
        base = write_sync_checkpoint(model, model.state_dict(), tok, work / "base")
        ec = EngineConfig(kind="vllm", launch=1, port=free_port("127.0.0.1"), startup_timeout=900)
        pool = open_servers(ec, model_dir=str(base), log_dir=work / "logs", eos_token_ids=[tok.eos_token_id],
                            embedding=model.get_input_embeddings().weight.detach())
        try:
            probe = tok.encode("the shop sells apples, pears and plums", add_special_tokens=False)
            folder = timed_rounds(pool, model, tok, probe, args.rounds, "folder", work, args.tolerance)
            pool.connect_weight_sync(ec, "gloo")
            memory = timed_rounds(pool, model, tok, probe, args.rounds, "memory", work, args.tolerance)
        except BaseException:
            print(pool.servers[0].describe(), file=sys.stderr)  # with the tail of the server's log
            raise
        finally:
            pool.close()
        nbytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
        if getattr(model.config, "tie_word_embeddings", False):
            nbytes += model.get_input_embeddings().weight.numel() * 4  # the untied head both paths send
        res = {"bench": "weight_sync", **run_meta(__file__, argv), "layers": args.layers, "vocab": model.config.vocab_size, "hidden": model.config.hidden_size,
               "bytes": nbytes, "rounds": args.rounds, "folder_s": folder, "memory_s": memory,
               "folder_median_s": statistics.median(folder), "memory_median_s": statistics.median(memory)}
        res["speedup"] = res["folder_median_s"] / res["memory_median_s"]
        print(json.dumps(res, indent=1))
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(res, indent=1) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
