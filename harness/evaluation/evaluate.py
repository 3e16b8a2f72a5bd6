"""Evaluation runs: a model on registered envs or benchmark splits, with traces, verdicts and summaries.

::

    cfg = EvalRunConfig(envs=["lopd/bfcl-v3-simple-v0", "lopd/shop-v0"], model="micro:pinned",
                        out="runs/eval-a", n_samples=2, limit=50)
    result = run_eval(cfg)              # HF engine in-process; engine=EngineConfig(kind="vllm", launch=1) for a server
    result.summary["benchmarks"]["bfcl-v3"]["official"]["overall"]

The output directory holds ``traces.jsonl`` (one :class:`~envs.trace.Episode` per (env, task, sample);
``meta`` has run, model, engine, category, sample, task_index and the env's verdict details),
``verdicts.jsonl`` (one line per episode, derived from its trace by :func:`verdict_of`),
``summary.json`` and ``run.json`` (the settings, checked on resume). A run resumes where it stopped:
pairs with a readable trace are skipped; a torn last line (a kill mid-write) is cut off and rerun
(:mod:`harness.evaluation.eval_dir`).

Summaries: every env gets the generic one (:func:`generic_summary`: mean reward, pass rate, mean
steps); a benchmark whose env package is in :data:`SUMMARIZERS` also gets its official aggregate,
computed by that package's own scoring code. See docs/EVAL.md.
"""

from __future__ import annotations

import json
import queue
import sys
import zlib
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym

from envs.trace import Episode, TraceWriter
from harness.config import Device, NonNegFloat, NonNegInt, PosInt, Probability, check_fields
from harness.engines.server import EngineConfig
from harness.rollout import LockedTokenizer
from harness.evaluation.eval_dir import (TRACES, VERDICTS, check_run_file, jsonable, read_progress, verdict_of,
                                         write_summary)
from harness.evaluation.summary import (  # noqa: F401  (re-exported: the public API of evaluation runs)
    SUMMARIZERS,
    Summarizer,
    env_package,
    format_summary,
    generic_summary,
    register_summarizer,
    summarize_verdicts,
)

# Final-step info keys that are conversation plumbing, not verdict details.
_NOT_DETAILS = {"step", "messages", "tools", "system", "final_reward"}


@dataclass
class EvalRunConfig:
    """One evaluation run (the options of ``lopd eval``)."""

    envs: list[str]
    """Registered env ids (``lopd/...``); each is one benchmark split or category."""
    model: str
    """Model directory (weights + tokenizer), or ``micro:pinned`` (the pinned micro base). With a server
    engine only its tokenizer and config are read (and a launched server loads it)."""
    out: str
    """Output directory (created; an existing one is resumed)."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    """Where episodes run: 'hf' in-process, batched turn by turn; 'vllm' or 'sglang' servers (urls or launch)."""
    n_samples: PosInt = 1
    """Episodes per task (sample indices 0..n_samples-1)."""
    split: str | None = None
    """Only tasks of this split (e.g. 'eval', 'test'); None keeps every task the env lists."""
    limit: NonNegInt | None = None
    """Only the first N tasks of each env (after the split filter)."""
    temperature: NonNegFloat = 0.7
    """Sampling temperature (0: greedy). Default: the LOPD authors' rollout settings."""
    top_p: Probability = 0.95
    """Nucleus sampling."""
    top_k: int = 20
    """Top-k sampling; <= 0 keeps the whole vocabulary."""
    max_new_tokens: PosInt = 1024
    """Most tokens per assistant turn."""
    seed: int | None = 0
    """Base seed: each (env, task, sample) gets a seed derived from it; None samples unseeded."""
    max_turns: PosInt = 30
    """Most assistant turns per episode (the env's own limit usually ends it first)."""
    max_context_tokens: PosInt = 32768
    """An episode whose next turn could pass this many tokens is truncated."""
    batch_size: PosInt = 8
    """HF engine: episodes rolled out together in one batch."""
    concurrency: PosInt = 32
    """Server engines: episodes in flight at once (one thread each)."""
    device: Device | None = None
    """HF engine device; None: cuda when available, else cpu."""
    dtype: Literal["bfloat16", "float16", "float32", "auto"] | None = None
    """HF engine weights dtype; None: bfloat16 on cuda, float32 on cpu."""
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Keyword arguments of ``gym.make`` per env id; the key '*' applies to every env."""
    env_urls: dict[str, str] = field(default_factory=dict)
    """Env id -> the URL of a server that serves it (``lopd serve ID``): played through lopd/remote-v0."""
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra chat-template variables, e.g. {"enable_thinking": false} for Qwen3."""
    run_name: str | None = None
    """``meta.run`` of the traces (what ``lopd stats --by run`` groups by); default: the out dir name."""

    def __post_init__(self) -> None:
        check_fields(self)  # lopd eval builds one from its flags

    def run_label(self) -> str:
        return self.run_name or Path(self.out).resolve().name


@dataclass(frozen=True)
class Pair:
    """One episode to play: a task of an env and a sample index."""

    env_id: str
    task_id: str
    task_index: int
    sample: int
    category: str

    @property
    def key(self) -> tuple[str, str, int]:
        return self.env_id, self.task_id, self.sample


@dataclass
class EvalResult:
    """What :func:`run_eval` did."""

    out: Path
    planned: int
    """Episodes the plan asks for."""
    skipped: int
    """Planned episodes already done (resume)."""
    ran: int
    """Episodes played and written now."""
    failed: list[tuple[tuple[str, str, int], str]]
    """(key, error) of episodes that raised (engine or env failure); nothing was written for them."""
    summary: dict[str, Any]
    notes: list[str]
    """Repairs and problems found in existing files (torn lines, corrupt lines, orphan verdicts)."""


# ---- keys, seeds, verdicts -------------------------------------------------------------------

def pair_seed(base: int, env_id: str, task_id: str, sample: int) -> int:
    """A stable per-episode seed (crc32, so the same across processes and runs)."""
    return zlib.crc32(f"{base}|{env_id}|{task_id}|{sample}".encode()) & 0x7FFFFFFF


# ---- planning and running ----------------------------------------------------------------------

class _Recorder(gym.Wrapper):
    """Keeps the verdict details of the final step's info (the rollout keeps only the reward)."""

    def reset(self, **kw: Any) -> Any:
        self.details: dict[str, Any] = {}
        return self.env.reset(**kw)

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            details = {k: v for k, v in info.items() if k not in _NOT_DETAILS}
            try:
                self.details = jsonable(details)
            except (ValueError, TypeError, RecursionError) as e:  # e.g. a circular structure
                self.details = {"unserializable_details": f"{type(e).__name__}: {e}"[:300]}
        return obs, reward, terminated, truncated, info


class _EnvPool:
    """Reusable env instances per id (building an env can load a whole benchmark)."""

    def __init__(self, kwargs: dict[str, dict[str, Any]], urls: dict[str, str] | None = None):
        self.kwargs, self.urls, self.free, self.all = kwargs, urls or {}, defaultdict(queue.SimpleQueue), []

    def make(self, env_id: str) -> _Recorder:
        from envs.registry import make  # an unknown --env-kwargs key: an error naming it and the known ones
        from harness.env_source import open_env
        from harness.training.train_config import EnvConfig

        kw = {**self.kwargs.get("*", {}), **self.kwargs.get(env_id, {})}
        if env_id in self.urls:
            env = _Recorder(open_env(EnvConfig(id=env_id, kwargs=kw, url=self.urls[env_id]))[1])
        else:
            env = _Recorder(make(env_id, **kw))
        env.pool_key = env_id
        self.all.append(env)
        return env

    def take(self, env_id: str) -> _Recorder:
        try:
            return self.free[env_id].get_nowait()
        except queue.Empty:
            return self.make(env_id)

    def give(self, env: _Recorder) -> None:
        self.free[env.pool_key].put(env)

    def close(self) -> None:
        for env in self.all:
            try:
                env.close()
            except Exception:  # noqa: BLE001, S110 - closing is best effort
                pass


def resolve_env_id(name: str) -> str:
    """``shop-v0`` -> ``lopd/shop-v0``; ``mypkg:lopd/todo-v0`` imports mypkg first (as ``gym.make`` does);
    unknown ids are a clear error listing the known ones (:func:`envs.registry.resolve_env_id`)."""
    from envs.registry import resolve_env_id as resolve

    return resolve(name)


def plan(cfg: EvalRunConfig, pool: _EnvPool) -> list[Pair]:
    """Every (env, task, sample) of the run, env by env, task by task, samples together."""
    pairs = []
    for env_id in cfg.envs:
        env = pool.take(env_id)
        tasks = env.unwrapped.tasks
        if cfg.split is not None:
            splits = sorted({t.split for t in tasks})
            tasks = [t for t in tasks if t.split == cfg.split]
            if not tasks:
                raise ValueError(f"{env_id} has no task in split {cfg.split!r} (its splits: {', '.join(splits)})")
        pool.give(env)
        for i, t in enumerate(tasks[: cfg.limit] if cfg.limit is not None else tasks):
            cat = t.data.get("category") if isinstance(t.data, dict) else None
            pairs += [Pair(env_id, t.task_id, i, k, cat if isinstance(cat, str) else env_id)
                      for k in range(cfg.n_samples)]
    return pairs


def _eos_ids(model_dir: str, tokenizer: Any) -> list[int]:
    """End-of-turn ids from the model directory's generation config, config, or tokenizer."""
    for name in ("generation_config.json", "config.json"):
        p = Path(model_dir) / name
        if p.is_file():
            try:
                eos = json.loads(p.read_text(encoding="utf-8")).get("eos_token_id")
            except ValueError:
                continue
            if eos is not None:
                return [int(e) for e in (eos if isinstance(eos, list) else [eos])]
    return [int(tokenizer.eos_token_id)] if tokenizer.eos_token_id is not None else []


def build_engine(cfg: EvalRunConfig) -> tuple[Any, Any]:
    """(engine, tokenizer) for the config: an HFEngine over the model, or a pool of vLLM/SGLang servers."""
    from harness.engines import HFEngine
    from harness.engines.server import open_servers
    from harness.models import load_tokenizer
    from harness.models.pinned import resolve_model_path

    model = resolve_model_path(cfg.model)
    if cfg.engine.kind == "hf":
        import torch

        device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = cfg.dtype or ("bfloat16" if str(device).startswith("cuda") else "float32")
        eng = HFEngine.from_pretrained(model, dtype=dtype if dtype == "auto" else getattr(torch, dtype),
                                       device=device)
        return eng, eng.tokenizer
    tok = load_tokenizer(model)
    pool = open_servers(cfg.engine, model_dir=str(Path(model).resolve()), log_dir=Path(cfg.out) / "servers",
                        eos_token_ids=_eos_ids(model, tok), dtype=cfg.dtype or "auto",
                        gpu=_has_cuda(), served_name=Path(model).name or "model")
    return pool, tok


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _settings(cfg: EvalRunConfig) -> dict[str, Any]:
    from harness.models.pinned import resolve_model_path

    d = asdict(cfg)
    model = resolve_model_path(cfg.model)  # an alias and its folder are one model to a resumed run
    d["model"] = str(Path(model).resolve()) if Path(model).exists() else cfg.model
    return d


def run_eval(cfg: EvalRunConfig, engine: Any = None, tokenizer: Any = None,
             log: Callable[[str], None] | None = None, warn: Callable[[str], None] | None = None) -> EvalResult:
    """Play every planned episode not yet in ``cfg.out``, write traces and verdicts as they finish,
    then write the summary of everything the directory holds. ``engine``/``tokenizer`` default to
    :func:`build_engine`; server engines (anything but an in-process HFEngine) run episodes on
    ``cfg.concurrency`` threads, others in batches of ``cfg.batch_size``. ``log`` takes the progress lines,
    ``warn`` the repairs of the folder and the failed episodes (default: ``log`` when given, else stderr;
    ``lopd eval --quiet`` silences only ``log``)."""
    warn = warn or log or _to_stderr
    log = log or _to_stderr
    if cfg.n_samples < 1 or (cfg.limit is not None and cfg.limit < 0):
        raise ValueError("n_samples must be >= 1 and limit >= 0")
    cfg.envs = [e if e in cfg.env_urls else resolve_env_id(e) for e in cfg.envs]  # a served env needs no install
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    progress = read_progress(out)
    check_run_file(out, _settings(cfg), has_episodes=bool(progress.traces))
    for n in progress.notes:
        warn(f"[eval] {n}")
    pool = _EnvPool(cfg.env_kwargs, cfg.env_urls)
    try:
        pairs = plan(cfg, pool)
        todo = [p for p in pairs if p.key not in progress.traces]
        log(f"[eval] {len(pairs)} episodes planned, {len(pairs) - len(todo)} already done, {len(todo)} to run")
        failed: list[tuple[tuple[str, str, int], str]] = []
        ran = 0
        if todo:
            own = engine is None
            if own:
                engine, tokenizer = build_engine(cfg)
            try:
                ran = _play_and_save(cfg, todo, pool, engine, tokenizer, failed, log, warn)
            finally:
                if own:
                    engine.close()  # launched servers stop here
        final = read_progress(out, repair=False)
        summary = summarize_verdicts(final.verdicts.values())
        summary.update(run=cfg.run_label(), model=cfg.model, engine=cfg.engine.kind, failed=len(failed))
        write_summary(out, summary)
        return EvalResult(out, len(pairs), len(pairs) - len(todo), ran, failed, summary, progress.notes)
    finally:
        pool.close()


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _episode_player(cfg: EvalRunConfig, pool: _EnvPool,
                    engine: Any) -> Callable[[list[Pair], Any], list[Episode]]:
    """``play(batch, tokenizer)``: one rollout of the pairs of ``batch`` on envs lent by ``pool``; each
    episode carries its pair's env id and the run's meta, with the env's verdict details."""
    from harness.engines import SamplingParams
    from harness.rollout import RolloutConfig, rollout

    sampling = SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k,
                              max_new_tokens=cfg.max_new_tokens).validate()
    rcfg = RolloutConfig(max_turns=cfg.max_turns, max_context_tokens=cfg.max_context_tokens,
                         template_kwargs=dict(cfg.template_kwargs))
    meta = {"run": cfg.run_label(), "model": cfg.model, "engine": cfg.engine.kind}

    def seed_of(p: Pair) -> int | None:
        return None if cfg.seed is None else pair_seed(cfg.seed, p.env_id, p.task_id, p.sample)

    def play(batch: list[Pair], tok: Any) -> list[Episode]:
        envs = [pool.take(p.env_id) for p in batch]
        try:
            s0 = seed_of(batch[0])
            params = sampling if s0 is None else SamplingParams(**{**asdict(sampling), "seed": s0})
            trajs = rollout(envs, engine, tok, sampling=params, seeds=[seed_of(p) for p in batch],
                            options=[{"task_id": p.task_id} for p in batch], config=rcfg)
            eps = []
            for p, env, tr in zip(batch, envs, trajs):
                ep = tr.episode
                ep.env_id = p.env_id
                ep.meta.update(meta, category=p.category, sample=p.sample, task_index=p.task_index,
                               verdict=getattr(env, "details", {}))
                eps.append(ep)
            return eps
        finally:
            for env in envs:
                pool.give(env)

    return play


def _play_and_save(cfg: EvalRunConfig, todo: list[Pair], pool: _EnvPool, engine: Any, tokenizer: Any,
                   failed: list, log: Callable[[str], None], warn: Callable[[str], None]) -> int:
    """Play ``todo`` (batched on an HFEngine, else threaded), appending each episode's trace and verdict
    to ``cfg.out`` as it finishes; failures go to ``failed``. Returns the episodes saved."""
    from harness.engines import HFEngine

    play = _episode_player(cfg, pool, engine)
    out, ran = Path(cfg.out), 0
    with TraceWriter(out / TRACES) as tw, open(out / VERDICTS, "a", encoding="utf-8") as vf:
        def save(ep: Episode) -> None:
            nonlocal ran
            tw.write(ep)
            vf.write(json.dumps(verdict_of(ep), ensure_ascii=False) + "\n")
            vf.flush()
            ran += 1
            if ran % max(1, len(todo) // 20) == 0 or ran == len(todo):
                log(f"[eval] {ran}/{len(todo)} episodes done")

        if isinstance(engine, HFEngine):
            _run_batched(todo, cfg.batch_size, lambda b: play(b, tokenizer), save, failed, warn)
        else:
            shared = LockedTokenizer(tokenizer)  # one lock for all rollout threads
            _run_threaded(todo, cfg.concurrency, lambda b: play(b, shared), save, failed, warn)
    return ran


def _fatal(e: BaseException) -> bool:
    from harness.engines.http import ServerUnavailableError

    return isinstance(e, (ServerUnavailableError, KeyboardInterrupt, MemoryError))


def _run_batched(todo: list[Pair], size: int, play: Callable[[list[Pair]], list[Episode]],
                 save: Callable[[Episode], None], failed: list, log: Callable[[str], None]) -> None:
    batches: list[list[Pair]] = []
    for p in todo:  # one env per batch: its prompts have similar lengths, so little padding
        if batches and len(batches[-1]) < max(1, size) and batches[-1][0].env_id == p.env_id:
            batches[-1].append(p)
        else:
            batches.append([p])
    for batch in batches:
        try:
            eps = play(batch)
        except Exception as e:
            if _fatal(e):
                raise
            if len(batch) == 1:
                failed.append((batch[0].key, f"{type(e).__name__}: {e}"[:500]))
                log(f"[eval] episode {batch[0].key} failed: {failed[-1][1]}")
                continue
            # One bad episode must not sink the batch: replay its episodes one by one.
            _run_batched(batch, 1, play, save, failed, log)
            continue
        for ep in eps:
            save(ep)


def _run_threaded(todo: list[Pair], workers: int, play: Callable[[list[Pair]], list[Episode]],
                  save: Callable[[Episode], None], failed: list, log: Callable[[str], None]) -> None:
    ex = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="eval")
    try:
        futures = {ex.submit(play, [p]): p for p in todo}
        for fut in as_completed(futures):  # results are written here, on one thread, as they finish
            try:
                eps = fut.result()
            except Exception as e:
                if _fatal(e):
                    raise
                failed.append((futures[fut].key, f"{type(e).__name__}: {e}"[:500]))
                log(f"[eval] episode {futures[fut].key} failed: {failed[-1][1]}")
                continue
            for ep in eps:
                save(ep)
    finally:
        ex.shutdown(wait=True, cancel_futures=True)
