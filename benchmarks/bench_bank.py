"""Experience bank speed and size: query latency, batched throughput, build time, bytes on disk.

    .venv/bin/python benchmarks/bench_bank.py                    # everything (about 10 min on 2 cores)
    .venv/bin/python benchmarks/bench_bank.py --sizes 1000 10000 --real-task 200 --real-traj 50   # quick

Target (issue 6): top-3 over 100k entries under 5 ms per query on 2 cores with the approximate
index, at recall@3 >= 0.95 against exact search. The peer in the same run is the exact flat index
(IndexFlatIP), whose single-query time is bounded below by one pass over all vectors at the
machine's memory bandwidth (the "physical floor", measured here too).

Latency sections use synthetic unit vectors of MiniLM's dimension (384) drawn around 2,000 random
topic centres (same-topic cosine ~0.55, like paraphrased tasks; uniform random vectors would have
no neighbourhood structure at all). Embedding 100k rendered experiences with MiniLM on 2 shared
cores would take hours, so the real pipeline (trace file -> render -> MiniLM -> faiss -> save) is
timed on a smaller set and reported per 1k entries.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs.trace import CallRecord, Episode, Step, write_traces  # noqa: E402
from lopd.bank import BankConfig, ExperienceBank  # noqa: E402
from lopd.bank.experience import Experience, SourceRef  # noqa: E402
from lopd.bank.ingest import IngestReport, experiences_from_traces  # noqa: E402
from lopd.bank.store import disk_bytes  # noqa: E402

DIM = 384


def clustered(n: int, seed: int, centers: np.ndarray, sigma: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = centers[rng.integers(len(centers), size=n)] + sigma * rng.standard_normal((n, DIM)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def memory_bandwidth() -> float:
    """Single-thread streaming read bandwidth in bytes/s (best of 5 sums over 256 MiB)."""
    a = np.ones(64 << 20, dtype=np.float32)
    best = min(_timed(lambda: a.sum(dtype=np.float32)) for _ in range(5))
    return a.nbytes / best


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(xs, p))


# ---- synthetic but realistic episodes for the real pipeline --------------------------------------
ENVS = ["lopd/envscaler-v0", "lopd/bfcl-v3-v0", "lopd/acebench-v0"]
VERBS = ["Cancel", "Refund", "Update", "Find", "Book", "Reschedule", "Delete", "Create", "Transfer", "Check"]
OBJECTS = ["order", "flight", "hotel room", "subscription", "meeting", "payment", "account", "ticket", "parcel"]
NAMES = ["Alice", "Bob", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hiro", "Ines", "Jon"]
CITIES = ["Paris", "Lagos", "Osaka", "Lima", "Oslo", "Pune", "Quito", "Rome", "Seoul", "Tunis"]
TOOLS = ["get_user", "list_orders", "get_order", "cancel_order", "issue_refund", "search_flights", "book",
         "update_record", "send_email", "get_balance", "transfer_funds", "create_event"]


def synth_episodes(n: int, seed: int = 0) -> list[Episode]:
    rng = random.Random(seed)
    eps = []
    for i in range(n):
        v, o, who, city = rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(NAMES), rng.choice(CITIES)
        prompt = (f"{v} the {o} #{rng.randint(1000, 99999)} for {who} in {city}. "
                  f"{who} wants it done before {rng.choice(['Monday', 'Friday', 'noon', 'the 3rd'])} and "
                  f"asks to be told the {rng.choice(['total', 'status', 'new date', 'reference'])}.")
        steps = []
        for j in range(rng.randint(2, 7)):
            args = {"id": rng.randint(1, 10**6), "name": who, "city": city, "note": rng.choice(["", "urgent", o])}
            result = json.dumps({"ok": True, "records": [{"id": rng.randint(1, 10**6), "field": "x" * rng.randint(5, 60),
                                                           "city": city} for _ in range(rng.randint(1, 25))]}, indent=2)
            steps.append(Step(j, "<tool_call>...</tool_call>", calls=[CallRecord(rng.choice(TOOLS), args, executed=True,
                                                                                   result=result)]))
        steps.append(Step(len(steps), f"<think>{'checking ' * 30}</think>Done: the {o} for {who} is handled.",
                          terminated=True))
        eps.append(Episode(env_id=ENVS[i % len(ENVS)], task_id=f"task-{i}", split="train", reward=1.0,
                           messages=[{"role": "user", "content": prompt}], steps=steps))
    return eps


def real_pipeline(n: int, embed_text: str, tmp: Path) -> dict:
    """Time trace file -> render -> MiniLM -> faiss -> save for n episodes."""
    path = tmp / f"traces-{embed_text}.jsonl"
    write_traces(path, synth_episodes(n, seed=1 if embed_text == "task" else 2))
    cfg = BankConfig(embed_text=embed_text)
    bank = ExperienceBank(cfg)
    bank.embedder.model  # load outside the timing (reported separately)
    t0 = time.perf_counter()
    exps = list(experiences_from_traces([path], cfg, IngestReport()))
    t1 = time.perf_counter()
    vecs = bank.embedder.encode_documents([bank.document_text(e) for e in exps])
    t2 = time.perf_counter()
    bank.add_experiences(exps, vecs)
    t3 = time.perf_counter()
    out = tmp / f"bank-{embed_text}"
    bank.save(out)
    t4 = time.perf_counter()
    per1k = 1000 / n
    return {"entries": len(bank), "embed_text": embed_text, "ingest_render_s_per_1k": (t1 - t0) * per1k,
            "embed_s_per_1k": (t2 - t1) * per1k, "index_s_per_1k": (t3 - t2) * per1k, "save_s_per_1k": (t4 - t3) * per1k,
            "total_s_per_1k": (t4 - t0) * per1k, "disk_bytes": disk_bytes(out),
            "mean_text_chars": float(np.mean([len(e.text) for e in exps])), "exps": exps, "vectors": vecs}


def single_latency(bank: ExperienceBank, queries: np.ndarray) -> tuple[list[float], list[list[int]]]:
    lat, ids = [], []
    for q in queries:
        t = time.perf_counter()
        (row,) = bank.search_vectors(q[None], 3)
        lat.append(time.perf_counter() - t)
        ids.append([h.id for h in row])
    return lat, ids


def latency_section(sizes: list[int], nq: int, template: list[Experience], tmp: Path, bw: float) -> list[dict]:
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((2000, DIM)).astype(np.float32) / np.sqrt(DIM)
    sigma = 1.0 / np.sqrt(DIM)
    rows = []
    for n in sizes:
        data = clustered(n, 1, centers, sigma)
        queries = clustered(nq, 2, centers, sigma)
        batch = clustered(256, 3, centers, sigma)
        exps = [Experience(t.env_id.split("/")[0] + "/bench-v0", f"b{i}", 1.0, "train", f"{t.task} [{i}]", t.trajectory,
                           SourceRef("bench", None, i)) for i, t in
                ((i, template[i % len(template)]) for i in range(n))]
        exact_ids = None
        for kind in ("flat", "hnsw"):
            bank = ExperienceBank(BankConfig(index=kind))
            t = time.perf_counter()
            bank.add_experiences(exps, data)
            build = time.perf_counter() - t
            shard = next(iter(bank._shards.values()))
            raw = [_timed(lambda q=q: shard.search(q[None], 3)) for q in queries]
            lat, ids = single_latency(bank, queries)
            if kind == "flat":
                exact_ids = ids
            recall = float(np.mean([len(set(a) & set(b)) / 3 for a, b in zip(ids, exact_ids)]))
            bank.search_vectors(batch[:8], 3)  # warm
            tb = min(_timed(lambda: bank.search_vectors(batch, 3)) for _ in range(3))
            out = tmp / f"bank-{n}-{kind}"
            t = time.perf_counter()
            bank.save(out)
            save_s = time.perf_counter() - t
            t = time.perf_counter()
            ExperienceBank.load(out)
            load_s = time.perf_counter() - t
            rows.append({"entries": n, "index": kind, "build_index_s": build, "raw_median_ms": pct(raw, 50) * 1e3,
                         "median_ms": pct(lat, 50) * 1e3, "p99_ms": pct(lat, 99) * 1e3, "recall@3": recall,
                         "batch256_qps": 256 / tb, "floor_ms": n * DIM * 4 / bw * 1e3,
                         "scan_gbps": n * DIM * 4 / pct(raw, 50) / 1e9, "disk_bytes": disk_bytes(out),
                         "save_s": save_s, "load_s": load_s})
            print(json.dumps(rows[-1]), flush=True)
            shutil.rmtree(out)
            del bank
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    ap.add_argument("--queries", type=int, default=300, help="single queries timed per configuration")
    ap.add_argument("--real-task", type=int, default=1000, help="episodes for the real pipeline, embed_text=task")
    ap.add_argument("--real-traj", type=int, default=200,
                    help="episodes for the real pipeline, embed_text=task_trajectory (256-token inputs: slow)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="torch.set_num_threads for MiniLM (default: torch's own choice)")
    args = ap.parse_args()
    import faiss
    import torch

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)

    print(f"# load average {os.getloadavg()}, faiss threads {faiss.omp_get_max_threads()}, "
          f"torch threads {torch.get_num_threads()}, cpus {os.cpu_count()}", flush=True)
    bw = memory_bandwidth()
    print(f"# single-thread read bandwidth {bw / 1e9:.1f} GB/s", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-bank-"))
    try:
        t = time.perf_counter()
        ExperienceBank(BankConfig()).embedder.model
        load_model_s = time.perf_counter() - t
        real = [real_pipeline(n, mode, tmp) for n, mode in ((args.real_task, "task"), (args.real_traj, "task_trajectory"))
                if n > 0]
        for r in real:
            print(json.dumps({k: v for k, v in r.items() if k not in ("exps", "vectors")}), flush=True)
        template = real[-1]["exps"] if real else synth_to_exps(1000)
        rows = latency_section(args.sizes, args.queries, template, tmp, bw)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(rows, real, bw, load_model_s)
    if args.json:
        args.json.write_text(json.dumps({"latency": rows, "real": [{k: v for k, v in r.items() if k not in ("exps", "vectors")}
                                                                    for r in real], "bandwidth": bw}, indent=1))
    return 0


def synth_to_exps(n: int) -> list[Experience]:
    from lopd.bank.ingest import to_experience

    cfg = BankConfig()
    return [to_experience(e, SourceRef("synth", None, i), cfg) for i, e in enumerate(synth_episodes(n))]


def report(rows: list[dict], real: list[dict], bw: float, load_model_s: float) -> None:
    print("\n| entries | index | median ms/query | p99 ms | faiss-only median ms | flat scan GB/s | "
          "DRAM-read floor ms | recall@3 | batch-256 queries/s | add s | disk MB | save s | load s |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        gbps = f"{r['scan_gbps']:.1f}" if r["index"] == "flat" else "-"  # HNSW reads a few hundred vectors, not all
        print(f"| {r['entries']:,} | {r['index']} | {r['median_ms']:.3f} | {r['p99_ms']:.3f} | {r['raw_median_ms']:.3f} | "
              f"{gbps} | {r['floor_ms']:.2f} | {r['recall@3']:.3f} | {r['batch256_qps']:,.0f} | "
              f"{r['build_index_s']:.2f} | {r['disk_bytes'] / 1e6:.1f} | {r['save_s']:.2f} | {r['load_s']:.2f} |")
    print(f"\nMiniLM load {load_model_s:.1f} s; read bandwidth {bw / 1e9:.1f} GB/s.\n")
    print("| embed_text | episodes | mean text chars | ingest+render s/1k | embed s/1k | index s/1k | save s/1k | "
          "total s/1k | disk MB |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in real:
        print(f"| {r['embed_text']} | {r['entries']} | {r['mean_text_chars']:.0f} | {r['ingest_render_s_per_1k']:.2f} | "
              f"{r['embed_s_per_1k']:.1f} | {r['index_s_per_1k']:.3f} | {r['save_s_per_1k']:.2f} | "
              f"{r['total_s_per_1k']:.1f} | {r['disk_bytes'] / 1e6:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
