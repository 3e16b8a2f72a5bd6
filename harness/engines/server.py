"""Inference servers: launch or attach, wait for health, balance requests, fail loudly, clean up.

The ``engine:`` section of a train or eval config picks where generation runs::

    engine:
      kind: vllm                 # hf (in-process, the default) | vllm | sglang
      launch: 2                  # start two servers on ports 8100, 8101 (or: urls: [http://node1:8000, ...])
      extra_args: [--tensor-parallel-size, "2"]

    pool = open_servers(cfg.engine, model_dir="runs/x/sync/step-0", log_dir="runs/x/servers",
                        eos_token_ids=[2], dtype="float32")
    pool.generate([ids_a, ids_b], params)          # each row to the least-loaded server
    pool.update_weights("runs/x/sync/step-1")      # every server reloads
    pool.close()                                   # kills the servers it launched

A launched server runs in its own process group with its log in ``log_dir``; :meth:`ServerPool.close`,
interpreter exit and the trainer's death (``PR_SET_PDEATHSIG``) each end it. A server that stops
answering is reported with its URL, and for a launched one its exit status and the tail of its log.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from harness.engines.base import (EmbedOverride, Engine, EngineError, GenerationOutput, SamplingParams, ScoreOutput,
                                  row_seed)
from harness.config import NonNegFloat, NonNegInt, PosFloat, PosInt
from harness.engines.http import HTTPStatusError, ServerUnavailableError

EngineKind = Literal["hf", "vllm", "sglang"]
_VLLM_VENV_PYTHON = Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "python"


@dataclass
class EngineConfig:
    """Where rollouts run: the in-process HF engine, or vLLM/SGLang servers (attached or launched)."""

    kind: EngineKind = "hf"
    """'hf': in-process transformers; 'vllm' or 'sglang': inference servers over HTTP."""
    urls: list[str] = field(default_factory=list)
    """Running servers to attach to (each serving the run's initial model); empty with ``launch`` > 0."""
    launch: NonNegInt = 0
    """Servers to start on this machine (ports ``port``, ``port + 1``, ...); 0 attaches to ``urls``."""
    python: str = ""
    """Interpreter with the server package; default: .venv-vllm/bin/python (``make vllm``) for vLLM, this
    one for SGLang."""
    host: str = "127.0.0.1"
    """Address launched servers listen on."""
    port: Annotated[int, ">= 1", "<= 65535"] = 8100
    """First port of launched servers."""
    extra_args: list[str] = field(default_factory=list)
    """Extra command-line arguments of launched servers (tensor parallelism, memory, ...)."""
    cpu_args: list[str] = field(default_factory=lambda: ["--enforce-eager", "--kv-cache-memory-bytes", "1073741824",
                                                         "--no-enable-chunked-prefill"])
    """Arguments added for a launched vLLM server when the trainer has no GPU (CPU backend defaults; see
    docs/GPU.md: vLLM 0.32's CPU worker crashes on a seeded request whose prompt is prefilled in chunks,
    so prompts prefill whole, with ``--max-num-batched-tokens`` set to the model's context length)."""
    startup_timeout: PosFloat = 900.0
    """Seconds a launched server may take to answer /health (a running one: this, at most 30)."""
    request_timeout: PosFloat = 600.0
    """Seconds one request may take."""
    max_inflight: PosInt = 64
    """Requests in flight per server; the server batches them continuously."""
    teacher_urls: list[str] = field(default_factory=list)
    """Servers holding the frozen initial model, for teacher scoring as top-k log-probs (OPSD and SDPO with
    ema_rate 0 with a top-k + tail KL, GRPO's reference KL); never synced. Same kind as the rollout servers."""
    teacher_launch: NonNegInt = 0
    """Teacher servers to start (ports after the rollout servers'); LOPD's latent teacher stays in-process."""
    sync_dir: str = ""
    """Where weights are written for the servers to reload (a filesystem they share); default <run_dir>/sync."""
    weight_sync: Literal["auto", "collective", "disk"] = "auto"
    """How new weights reach vLLM servers after a step: ``collective`` in memory (a broadcast through vLLM's
    collective RPC into its receiver extension, :mod:`harness.engines.weight_sync`; launched servers have it),
    ``disk`` through ``sync_dir``; ``auto`` in memory where every server has the receiver, else the folder.
    SGLang servers always use the folder."""
    weight_sync_host: str = "127.0.0.1"
    """Address of this machine that the servers reach for the in-memory sync's rendezvous."""
    weight_sync_backend: Literal["auto", "gloo", "nccl"] = "auto"
    """Transport of the in-memory sync: NCCL between GPUs, gloo through host memory; auto: NCCL when the
    trainer's model is on CUDA."""
    check_tolerance: NonNegFloat = 0.05
    """Largest mean |log p| difference (nats) between a server and the in-process model on a probe sequence:
    checked before training (a wrong model is refused) and after every weight sync."""

    def __post_init__(self) -> None:
        if self.kind not in ("hf", "vllm", "sglang"):
            raise ValueError(f"engine.kind must be hf, vllm or sglang, got {self.kind!r}")
        if self.kind == "hf" and (self.urls or self.launch or self.teacher_urls or self.teacher_launch):
            raise ValueError("engine.urls/launch/teacher_* need engine.kind vllm or sglang (hf runs in-process)")
        if min(self.launch, self.teacher_launch, self.max_inflight - 1) < 0:
            raise ValueError("engine.launch and teacher_launch must be >= 0, max_inflight >= 1")
        bad = [u for u in self.urls + self.teacher_urls if not u.startswith(("http://", "https://"))]
        if bad:
            raise ValueError(f"engine URLs must start with http:// or https://, got {bad[0]!r}")


@dataclass(eq=False)
class Server:
    """One server: its URL and, when launched here, its process and log."""

    url: str
    process: subprocess.Popen | None = None
    log: Path | None = None

    def describe(self) -> str:
        """The URL, and for a launched server whether it exited and its log's last lines."""
        out = self.url
        if self.process is not None:
            rc = self.process.poll()
            out += f" (pid {self.process.pid}, " + ("running" if rc is None else f"exited with status {rc}") + ")"
        if self.log is not None:
            out += f"; log {self.log}:\n" + log_tail(self.log)
        return out

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM the process group, wait up to ``grace`` seconds for its leader, then SIGKILL whatever
        of the group is left (workers that outlive the leader included)."""
        p = self.process
        if p is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            try:
                p.wait(grace if sig == signal.SIGTERM else 5.0)
            except subprocess.TimeoutExpired:
                pass


def _engine_died(e: HTTPStatusError) -> bool:
    """vLLM answers 500 "EngineCore encountered an issue" once its engine process is dead (killed, or
    crashed), in the moment before its API server exits too: the server is gone, not the request bad."""
    return e.status == 500 and "EngineCore encountered an issue" in f"{e} {e.detail}"


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as e:
        return f"  (unreadable: {e})"
    return "\n".join("  " + line[:300] for line in text[-lines:])


def server_command(cfg: EngineConfig, model_dir: str, port: int, dtype: str, served_name: str,
                   gpu: bool) -> tuple[list[str], dict[str, str]]:
    """(argv, extra environment) that start one ``cfg.kind`` server on ``model_dir``."""
    if cfg.kind == "vllm":
        python = cfg.python or str(_VLLM_VENV_PYTHON)
        argv = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir,
                "--served-model-name", served_name, "--host", cfg.host, "--port", str(port), "--dtype", dtype,
                "--enable-prompt-embeds"]
        if not gpu:
            argv += list(cfg.cpu_args) + ["--max-num-batched-tokens", str(context_length(model_dir))]
        # the in-memory weight sync's receiver (harness/engines/worker_ext/lopd_vllm_receiver.py imports only torch)
        argv += ["--worker-extension-cls", "lopd_vllm_receiver.WeightReceiver"]
        here = str(Path(__file__).resolve().parent / "worker_ext")
        env = {"VLLM_SERVER_DEV_MODE": "1",  # /collective_rpc and /reset_prefix_cache, for weight sync
               "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)}
    elif cfg.kind == "sglang":
        python = cfg.python or sys.executable
        argv = [python, "-m", "sglang.launch_server", "--model-path", model_dir, "--served-model-name", served_name,
                "--host", cfg.host, "--port", str(port), "--dtype", dtype]
        env = {}
    else:
        raise ValueError(f"engine.kind {cfg.kind!r} has no server to launch")
    if not Path(python).exists() and os.sep in python:
        hint = " (run `make vllm` to build it)" if cfg.kind == "vllm" else ""
        raise EngineError(f"engine.python {python} does not exist{hint}")
    return argv + list(cfg.extra_args), env


def context_length(model_dir: str, default: int = 8192) -> int:
    """The model's context length (``max_position_embeddings`` of its config.json)."""
    import json

    try:
        return int(json.loads((Path(model_dir) / "config.json").read_text())["max_position_embeddings"])
    except (OSError, ValueError, KeyError, TypeError):
        return default


def _die_with_parent() -> None:
    """In the child: SIGTERM when the parent dies, even by SIGKILL (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:
        pass


_LIVE: set[Server] = set()
_LIVE_LOCK = threading.Lock()


def _stop_all() -> None:
    for s in list(_LIVE):
        s.stop(grace=5.0)


atexit.register(_stop_all)


def launch(cfg: EngineConfig, model_dir: str, log_dir: Path, *, dtype: str, served_name: str,
           gpu: bool) -> list[Server]:
    """Start ``cfg.launch`` servers, each in its own process group with its log in ``log_dir``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    servers = []
    for i in range(cfg.launch):
        port = cfg.port + i
        argv, env = server_command(cfg, model_dir, port, dtype, served_name, gpu)
        log = log_dir / f"{cfg.kind}-{i}.log"
        with open(log, "ab") as fh:
            fh.write(("$ " + " ".join(argv) + "\n").encode())
            fh.flush()
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                    env={**os.environ, **env}, start_new_session=True, preexec_fn=_die_with_parent)
        s = Server(f"http://{cfg.host}:{port}", proc, log)
        with _LIVE_LOCK:
            _LIVE.add(s)
        servers.append(s)
    return servers


def wait_healthy(servers: Sequence[Server], engines: Sequence[Any], timeout: float) -> None:
    """Poll /health until every server answers; a server that exits or stays silent raises with its log."""
    deadline = time.monotonic() + timeout
    pending = list(zip(servers, engines))
    while pending:
        still = []
        for s, eng in pending:
            if s.process is not None and s.process.poll() is not None:
                raise EngineError(f"the server {s.describe()}\nexited before it was healthy")
            try:
                eng.http.request("GET", "/health", timeout=10.0, retries=0)
            except (ServerUnavailableError, EngineError):
                still.append((s, eng))
        pending = still
        if pending and time.monotonic() > deadline:
            raise EngineError(f"no answer on /health within {timeout:.0f} s from "
                              + "; ".join(s.describe() for s, _ in pending))
        if pending:
            time.sleep(2.0)


class ServerPool(Engine):
    """Several server engines behind one :class:`Engine`: each row goes to the server with the fewest
    rows in flight; a failure names the server (and its log, when launched here)."""

    concurrent = True  # rollouts play episodes independently (harness.rollout.rollout_in_flight)

    def __init__(self, engines: Sequence[Any], servers: Sequence[Server]):
        if not engines:
            raise EngineError("no inference server: give engine.urls or engine.launch")
        self.engines, self.servers = list(engines), list(servers)
        self._load = [0] * len(self.engines)
        self._lock = threading.Lock()
        width = sum(getattr(e, "max_inflight", 64) for e in self.engines)
        self._pool = ThreadPoolExecutor(width, thread_name_prefix="server-pool")

    @property
    def eos_token_ids(self) -> list[int]:
        return self.engines[0].eos_token_ids

    def _on_least_loaded(self, fn: Callable[[Any], Any]) -> Any:
        with self._lock:
            k = min(range(len(self.engines)), key=lambda j: self._load[j])
            self._load[k] += 1
        try:
            return fn(self.engines[k])
        except (ServerUnavailableError, HTTPStatusError) as e:
            if isinstance(e, HTTPStatusError) and not _engine_died(e):
                raise
            raise ServerUnavailableError(f"{e}\nserver: {self.servers[k].describe()}") from None
        finally:
            with self._lock:
                self._load[k] -= 1

    def _rows(self, n: int, fn: Callable[[Any, int], Any]) -> list[Any]:
        return list(self._pool.map(lambda i: self._on_least_loaded(lambda eng: fn(eng, i)), range(n)))

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams | None = None,
                 overrides: Sequence[EmbedOverride | None] | None = None) -> list[GenerationOutput]:
        params = (params or SamplingParams()).validate()
        ovs = list(overrides) if overrides is not None else [None] * len(prompts)
        # A row's seed depends on its index only, never on which server it lands on.
        return self._rows(len(prompts), lambda eng, i: eng.generate(
            [prompts[i]], replace(params, seed=row_seed(params.seed, i)), [ovs[i]])[0])

    def score(self, sequences: Sequence[Sequence[int]], *, top_k: int = 20, start: int | Sequence[int] = 1,
              overrides: Sequence[EmbedOverride | None] | None = None) -> list[ScoreOutput]:
        st = [start] * len(sequences) if isinstance(start, int) else list(start)
        ovs = list(overrides) if overrides is not None else [None] * len(sequences)
        return self._rows(len(sequences), lambda eng, i: eng.score([sequences[i]], top_k=top_k, start=st[i],
                                                                   overrides=[ovs[i]])[0])

    @property
    def weight_sync(self) -> str:
        """``"collective"`` when every server takes weights in memory (:meth:`connect_weight_sync`), else ``"disk"``."""
        modes = {getattr(e, "weight_sync", "disk") for e in self.engines}
        return "collective" if modes == {"collective"} else "disk"

    def connect_weight_sync(self, cfg: EngineConfig, backend: str) -> str:
        """Open the in-memory sync to every server as ``cfg.weight_sync`` asks; returns the mode in use. ``auto``
        falls back to the folder (and says why) when a server cannot; ``collective`` raises instead."""
        from harness.engines.weight_sync import WeightSyncUnavailable

        if cfg.weight_sync == "disk":
            return "disk"
        try:
            if cfg.kind != "vllm":
                raise WeightSyncUnavailable(f"{cfg.kind} servers take new weights from a folder only here")
            for eng in self.engines:
                eng.connect_weight_sync(host=cfg.weight_sync_host, backend=backend, timeout_s=cfg.request_timeout)
        except WeightSyncUnavailable as e:
            for eng in self.engines:
                if hasattr(eng, "disconnect_weight_sync"):
                    eng.disconnect_weight_sync()
            if cfg.weight_sync == "collective":
                raise
            print(f"[engine] weight sync through {cfg.sync_dir or 'the run folder'}: {e}", flush=True)
        return self.weight_sync

    def update_weights(self, source: Any) -> None:
        """Every server loads ``source``: a checkpoint directory they can all read, or (with the in-memory
        sync connected) a state dict."""
        def one(k: int) -> None:
            try:
                self.engines[k].update_weights(source)
            except ServerUnavailableError as e:
                raise ServerUnavailableError(f"{e}\nserver: {self.servers[k].describe()}") from None
        list(self._pool.map(one, range(len(self.engines))))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for eng in self.engines:
            eng.close()
        for s in self.servers:
            s.stop()
            with _LIVE_LOCK:
                _LIVE.discard(s)


def write_sync_checkpoint(template: Any, state: dict[str, Any], tokenizer: Any, path: Path) -> Path:
    """Save ``state`` (the student's full state dict) as a model directory a server loads, untied.

    The LM head is written as its own tensor with ``tie_word_embeddings: false``: vLLM's CPU backend
    packs the head's matrix once, so a reload of tied embeddings leaves it stale (measured with vLLM
    0.32: greedy decodes diverge after the sync). Servers must be launched from such a directory too.
    """
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one write per step: no bar each time
    sd = {k: v.detach().to("cpu") for k, v in state.items()}
    emb = next(k for k in sd if k.endswith("embed_tokens.weight"))
    if "lm_head.weight" not in sd or sd["lm_head.weight"].data_ptr() == sd[emb].data_ptr():
        sd["lm_head.weight"] = sd[emb].clone()  # its own storage: safetensors refuses shared tensors
    tied = template.config.tie_word_embeddings
    tmp = path.with_name(path.name + ".tmp")
    try:
        template.config.tie_word_embeddings = False
        template.save_pretrained(str(tmp), state_dict=sd)
    finally:
        template.config.tie_word_embeddings = tied
    tokenizer.save_pretrained(str(tmp))
    if path.exists():
        import shutil

        shutil.rmtree(path)
    tmp.rename(path)
    return path


def probe_gap(engine: Any, reference: Engine, probe: list[int]) -> float:
    """Mean |log p| gap (nats) between ``engine`` and the in-process ``reference`` on ``probe``'s tokens."""
    a = engine.score([probe], top_k=0, start=1)[0].token_logprobs
    b = reference.score([probe], top_k=0, start=1)[0].token_logprobs
    return float((a.double() - b.double()).abs().mean())


def check_servers(pool: ServerPool, reference: Engine, probe: list[int], tolerance: float, what: str) -> None:
    """Refuse servers whose model disagrees with the in-process one on ``probe`` (a wrong model or a
    failed weight sync)."""
    for eng, server in zip(pool.engines, pool.servers):
        gap = probe_gap(eng, reference, probe)
        if not gap <= tolerance:
            raise EngineError(f"{what}: the server at {server.url} disagrees with the in-process model by "
                              f"{gap:.4g} nats per token on a probe (engine.check_tolerance={tolerance}); "
                              "is it serving the run's model?")


def open_servers(cfg: EngineConfig, *, model_dir: str, log_dir: Path, eos_token_ids: Sequence[int],
                 dtype: str = "float32", served_name: str = "student", gpu: bool = False,
                 embedding: Any = None) -> ServerPool:
    """Launch (``cfg.launch``) or attach to (``cfg.urls``) servers and wait until all are healthy."""
    if cfg.kind not in ("vllm", "sglang"):
        raise ValueError(f"engine.kind must be 'vllm' or 'sglang' for servers, got {cfg.kind!r}")
    if bool(cfg.launch) == bool(cfg.urls):
        raise ValueError("engine: give either urls (attach to running servers) or launch > 0, not both or neither")
    servers = launch(cfg, model_dir, log_dir, dtype=dtype, served_name=served_name, gpu=gpu) if cfg.launch \
        else [Server(u) for u in cfg.urls]
    engines = [make_client(cfg, s.url, eos_token_ids, embedding, served_name if cfg.launch else None)
               for s in servers]
    pool = ServerPool(engines, servers)
    try:
        wait_healthy(servers, engines, cfg.startup_timeout if cfg.launch else min(cfg.startup_timeout, 30.0))
    except BaseException:
        pool.close()
        raise
    return pool


def make_client(cfg: EngineConfig, url: str, eos_token_ids: Sequence[int], embedding: Any,
                model: str | None) -> Any:
    if cfg.kind == "vllm":
        from harness.engines.vllm import VLLMEngine

        return VLLMEngine(url, model=model, eos_token_ids=eos_token_ids, embedding=embedding,
                          timeout=cfg.request_timeout, max_inflight=cfg.max_inflight)
    from harness.engines.sglang import SGLangEngine

    return SGLangEngine(url, eos_token_ids=eos_token_ids, embedding=embedding, timeout=cfg.request_timeout)
