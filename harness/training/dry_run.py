"""``lopd train CONFIG --dry-run [key=value ...]``: build what the run builds and take ONE step on the CPU.

    lopd train harness/configs/paper/lopd_envscaler_qwen3_4b.yaml --dry-run model.num_hidden_layers=2

Everything the real run builds is built from the config (the env and its data, the student, the learner
with its teachers and optimizers; for LOPD the bank and the composer as far as they can be offline), then
one full training step (this step's rollouts and the learner's update) runs, and its wall time and peak
memory are reported. What a dry run changes, each said in one line:

- the device is the CPU and rollouts play on the in-process ``hf`` engine (no vLLM/SGLang server, no
  torchrun: ``distributed`` does not apply);
- the run folder is a temporary one (the configured ``run_dir`` is not touched; nothing is kept);
- a model whose weights are not on disk (``Qwen/Qwen3-4B``, a missing ``/models/Qwen3-8B``, a folder with
  only a ``config.json``) gets random weights at its shape: the folder's config.json, else the official
  config of the Qwen3 model the path names (:data:`harness.models.shapes.QWEN3_CONFIGS`), with the project's
  tokenizer; ``model.num_hidden_layers`` and ``model.random_shape`` shrink it;
- LOPD/OPSD: a bank folder that is not on disk becomes a placeholder bank (a few training tasks' prompts,
  each with a one-line answer, the lexical ``hashing`` embedder) and a cold-start composer file that is not
  on disk becomes ``random``.

Peak memory is the process's peak RSS during the step: ``VmHWM`` of ``/proc/self/status`` after writing
``5`` to ``/proc/self/clear_refs`` just before the step (which resets it to the current RSS), so the figure
is the step's own, not the build's. :func:`memory_prediction` is the one place where the memory model's
prediction (``harness.training.memory_model.predict_peak``) is printed beside it, when that module exists.
Benchmark data the env needs that is absent (``$LOPD_DATA_DIR``) is an error naming it, before any model.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

GIB = 1024 ** 3
PLACEHOLDER_TASKS = 8
"""Training tasks whose prompts fill a placeholder bank."""


def _status_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))
    except (OSError, StopIteration):
        return None


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS counter (VmHWM := VmRSS); False where it cannot be (not Linux)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def has_weights(folder: Path) -> bool:
    return any(any(folder.glob(pattern)) for pattern in ("*.safetensors", "*.bin", "*.safetensors.index.json"))


def model_plan(cfg: Any) -> tuple[str, dict[str, Any] | None, str]:
    """How the dry run gets its student: ``(path, shape, source)``: ``shape`` None = load ``path`` (tiny,
    micro or weights on disk); else random weights at ``shape`` (config.json fields), ``source`` naming it."""
    import json

    from harness.models.pinned import resolve_model_path
    from harness.models.shapes import QWEN3_CONFIGS, shape_for

    path = resolve_model_path(cfg.model.path)
    folder = Path(path).expanduser()
    if path.startswith("tiny:") or (folder.is_dir() and (folder / "config.json").is_file() and has_weights(folder)):
        return path, None, path
    if (folder / "config.json").is_file():
        return path, json.loads((folder / "config.json").read_text()), f"{folder / 'config.json'}"
    shape = shape_for(path)
    if shape is None:
        known = ", ".join(QWEN3_CONFIGS)
        raise FileNotFoundError(f"model.path={cfg.model.path}: no model folder there, and not a model whose shape is "
                                f"known offline ({known}); give a model folder, or a folder with its config.json")
    name = next(k for k, v in QWEN3_CONFIGS.items() if v == shape)
    return path, shape, f"{name}'s official config.json (harness/models/shapes.py)"


def build_random_student(cfg: Any, shape: dict[str, Any], out: Path) -> Any:
    """Save random weights at ``shape`` (with ``model.num_hidden_layers``, ``model.random_shape``) to ``out``;
    returns the model's transformers config."""
    import torch

    from harness.models.shapes import random_qwen3
    from harness.models.tiny import save_pretrained
    from harness.models.tokenizer import build_tokenizer

    fields = {k: v for k, v in shape.items() if k not in ("architectures", "model_type", "torch_dtype", "dtype",
                                                          "transformers_version", "bos_token_id", "eos_token_id",
                                                          "pad_token_id")}
    fields.update(cfg.model.random_shape)
    layers = cfg.model.num_hidden_layers or fields.get("num_hidden_layers")
    tok = build_tokenizer()
    model = random_qwen3(fields, tok, layers=layers, vocab=fields.get("vocab_size"), seed=cfg.model.tiny_seed)
    model = model.to(getattr(torch, cfg.model.dtype))
    save_pretrained(model, tok, out)
    config = model.config
    del model
    return config


def placeholder_bank(cfg: Any, env_id: str, env: Any, out: Path) -> int:
    """Write a trace file of placeholder successes of the first training tasks (their prompts, a one-line
    answer), labelled with the bank's first training split; returns how many."""
    from envs.trace import Episode, Step, TraceWriter

    split = cfg.bank.config.train_splits[0]
    tasks = [t for t in env.unwrapped.all_tasks() if t.split == cfg.env.train_split][:PLACEHOLDER_TASKS]
    with TraceWriter(out) as w:
        for t in tasks:
            _, info = env.reset(seed=0, options={"task_id": t.task_id})
            answer = "A placeholder experience of the dry run: the task was solved."
            w.write(Episode(env_id=env_id, task_id=t.task_id,
                            split=split, seed=0, messages=[*info.get("messages", []),
                                                           {"role": "assistant", "content": answer}],
                            steps=[Step(index=0, text=answer)], reward=1.0, terminated=True))
    return len(tasks)


def memory_prediction(cfg: Any, hf_config: Any) -> int | None:
    """THE HOOK for the memory model: ``harness.training.memory_model.predict_peak(cfg, hf_config,
    device="cpu").total`` in bytes when that module exists and has ``predict_peak``, else None (only the
    measured figure is printed then)."""
    import importlib

    try:
        mm = importlib.import_module("harness.training.memory_model")
    except ImportError:
        return None
    predict = getattr(mm, "predict_peak", None)
    if predict is None:
        return None
    return int(predict(cfg, hf_config, device="cpu").total)


def dry_run(path: str | None, overrides: list[str], out: Callable[[str], None] = print) -> int:
    """Build the run of ``path`` + ``overrides`` on the CPU, take one step, report it; returns 0."""
    from harness.env_source import open_env
    from harness.learners.lopd_composer import RANDOM_COMPOSER
    from harness.learners.privileged import run_inputs
    from harness.training.train_config import load_train_config

    from envs.data import DataNotFoundError

    cfg = load_train_config(path, overrides, log=lambda s: print(s, file=sys.stderr))
    say = lambda s: out(f"dry run: {s}")  # noqa: E731
    m, e = cfg.model, cfg.engine
    if m.device != "cpu":
        say(f"model.device={m.device} -> cpu")
    m.device = "cpu"
    if e.kind != "hf" or e.teacher_urls or e.teacher_launch:
        say(f"engine.kind={e.kind} -> hf: rollouts play on the in-process engine (no {e.kind} server is started "
            "or attached in a dry run)")
    cfg.engine = dataclasses.replace(e, kind="hf", urls=[], launch=0, teacher_urls=[], teacher_launch=0)
    if cfg.distributed.strategy != "ddp":
        say(f"distributed.strategy={cfg.distributed.strategy}: not applied (one process, no torchrun)")
    work = Path(tempfile.mkdtemp(prefix="lopd-dry-run-"))
    try:
        say(f"run_dir={cfg.run_dir} -> a temporary folder (nothing is written to the run's folder, nothing kept)")
        cfg.run_dir = str(work / "run")
        cfg.generations = cfg.rollouts_per_step  # one step
        cfg.eval = dataclasses.replace(cfg.eval, at_start=False, at_end=False, every_generations=0)
        cfg.checkpoint = dataclasses.replace(cfg.checkpoint, every_steps=0, resume=False)
        cfg.log = dataclasses.replace(cfg.log, progress=False, tensorboard=False)

        # the env first: missing benchmark data is a message naming it, before any model is built
        try:
            env_id, env = open_env(cfg.env)
            env.unwrapped.all_tasks()  # the loaders read their data here
        except DataNotFoundError as err:
            raise DataNotFoundError(f"{cfg.env.id} needs benchmark data that is not here: {err}") from None

        model_path, shape, source = model_plan(cfg)
        if shape is None:
            if m.random_shape:
                raise ValueError(f"model.random_shape applies to a model built with random weights; {m.path} "
                                 "is loaded as it is")
            first = f", first {m.num_hidden_layers} layers" if m.num_hidden_layers else ""
            say(f"model: {m.path}, as the run loads it{first}")
        else:
            hf_config = build_random_student(cfg, shape, work / "model")
            say(f"model: {m.path} has no weights on disk: random weights at the shape of {source}"
                + (f" with {dict(m.random_shape)}" if m.random_shape else "")
                + f": {hf_config.num_hidden_layers} of {shape.get('num_hidden_layers', '?')} layers, hidden "
                  f"{hf_config.hidden_size}, MLP {hf_config.intermediate_size}, {hf_config.num_attention_heads}/"
                  f"{hf_config.num_key_value_heads} heads, vocabulary {hf_config.vocab_size}, {m.dtype}; the "
                  "project's tokenizer")
            cfg.model = dataclasses.replace(m, path=str(work / "model"), num_hidden_layers=None, random_shape={})

        bank, composer = run_inputs(cfg)
        if bank and not cfg.bank.traces and not (cfg.bank.path and Path(cfg.bank.path).exists()):
            n = placeholder_bank(cfg, env_id, env, work / "bank.jsonl")
            say(f"bank.path={cfg.bank.path} is not on disk -> a placeholder bank of {n} training tasks' prompts with "
                "a one-line answer, hashing embedder (no retriever model is loaded in a dry run)")
            cfg.bank = dataclasses.replace(cfg.bank, path=None, traces=[str(work / "bank.jsonl")], embedder="hashing")
        if composer and cfg.lopd.composer_init != RANDOM_COMPOSER and not (
                cfg.lopd.composer_init and Path(cfg.lopd.composer_init).is_file()):
            say(f"lopd.composer_init={cfg.lopd.composer_init} is not on disk -> {RANDOM_COMPOSER}")
            cfg.lopd.composer_init = RANDOM_COMPOSER
        env.close()
        return _one_step(cfg, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _one_step(cfg: Any, out: Callable[[str], None]) -> int:
    from harness.training.trainer import Trainer

    t0 = time.perf_counter()
    tr = Trainer(cfg)
    try:
        built = time.perf_counter() - t0
        reset = reset_peak_rss()
        held = _status_bytes("VmRSS")
        t1 = time.perf_counter()
        rec = tr.train_step()
        wall = time.perf_counter() - t1
        peak = _status_bytes("VmHWM")
        hf_config = tr.student.config
    finally:
        tr.close()
    bits = [f"{k.split('/')[-1]} {rec[k]:.4g}" for k in ("train/reward", "train/loss", "train/tokens") if k in rec]
    n = cfg.rollouts_per_step
    out(f"dry run: built in {built:.1f} s; one {cfg.learner} step ({n} rollout{'s' if n != 1 else ''} + the update) in "
        f"{wall:.1f} s (rollouts {rec['time/rollout']:.1f} s, update {rec['time/update']:.1f} s)"
        + (f"; {', '.join(bits)}" if bits else ""))
    if peak is None:
        out("dry run: peak memory: unknown (no /proc/self/status here)")
    else:
        what = "the step's peak RSS (VmHWM, reset before the step)" if reset else "peak RSS since the start (VmHWM)"
        out(f"dry run: {what}: {peak / GIB:.2f} GiB; {held / GIB:.2f} GiB held before the step")
    predicted = memory_prediction(cfg, hf_config)
    if predicted is not None:
        out(f"dry run: memory model (harness.training.memory_model.predict_peak, device cpu): {predicted / GIB:.2f} GiB"
            + (f" predicted against {peak / GIB:.2f} GiB measured" if peak is not None else ""))
    return 0
