"""The micro world's base model: the tiny default model pretrained on a corpus the world generates.

Pipeline (:func:`load_or_build_base`): build the world -> generate the SFT corpus (noisy-expert
trajectories and referenced trajectories) -> train the tokenizer on it -> pretrain the tiny Qwen3
(:mod:`harness.basemodel.pretrain`) -> ``save_pretrained`` into the cache. The cache folder is keyed by a hash
of the config and of the code that makes the world, the corpus, the tokenizer and the fit, so it
trains once and a changed generator never reuses a stale model::

    model, tok, info = load_or_build_base()              # BaseModelConfig() defaults; cached
    env = make_env(info["config"], split="eval")         # the env the base was trained for
    scores = evaluate_base(model, tok, info["config"])   # {"no_context": ..., "with_reference": ...}

Two kinds of corpus item (docs/MICRO.md, "The base model"):

- plain: the noisy expert, which follows the right procedure only part of the time (per domain);
- referenced: a successful trajectory of another train task with the same procedure, framed into
  the first user message with :func:`lopd.latent.frame_user_message` (the text in place of the
  latents), then the correct procedure on the target. So the same model acts much better when it
  is given a good reference, the gap self-distillation needs.

Renaming, copy drills and the tokenizer live in :mod:`harness.basemodel.corpus`. The tokenizer is the
project's byte-level BPE layout (every special token kept), trained on the corpus with entity names
and digits taken out: names and ids then split into pieces shared by both splits, so held-out names
(disjoint from train) tokenise like train ones.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import random
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from envs.micro.env import MicroEnv
from envs.micro.expert import noisy_expert
from envs.micro.sft import referenced_trajectory
from envs.micro.world import cache_root, fingerprint
from harness.atomic_dir import build_dir
from harness.basemodel.config import BASE_VERSION, BaseModelConfig, as_config, env_kwargs, make_env, plain_config
from harness.basemodel.corpus import (
    Words,
    build_base_tokenizer,
    copy_drills,
    corpus_keys,
    corpus_stats,
    encode_corpus,
    fresh_word,
    rename_entities,
)
from harness.basemodel.pin import copy_pinned, stale_reason
from harness.basemodel.pretrain import Example, PretrainResult, encode_conversation, pretrain
from harness.basemodel.references import reference_framing
from harness.models import pinned
from harness.models.defaults import ModelDefaults, ModelEnv, write_model_defaults


BASE_SOURCES = (
    "harness/basemodel/build.py", "harness/basemodel/config.py", "harness/basemodel/references.py",
    "harness/basemodel/corpus.py", "harness/basemodel/pretrain.py", "harness/rollout.py",
    "harness/models/tokenizer.py", "harness/models/tiny.py", "harness/models/chat_template.jinja",
    "envs/micro/env.py", "envs/micro/expert.py", "envs/micro/sft.py", "lopd/latent.py",
    "envs/envscaler/env.py", "envs/envscaler/parse.py",
)
"""The code that makes a base besides the world (repository paths): part of its cache key."""


def config_key(cfg: BaseModelConfig) -> str:
    """Hash of the config and of the generator code (world, corpus, tokenizer, model, fit)."""
    d = asdict(cfg)
    d["pretrain"].pop("progress", None)
    d["pretrain"].pop("threads", None)
    h = hashlib.sha256(json.dumps(d, sort_keys=True).encode())
    h.update(f"v{BASE_VERSION}:{fingerprint()}".encode())
    root = Path(__file__).resolve().parents[2]
    for rel in BASE_SOURCES:
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes())  # a moved file fails here, not silently
    return h.hexdigest()[:16]


# ---- corpus -------------------------------------------------------------------------------------
def build_corpus(env: MicroEnv, cfg: BaseModelConfig) -> list[dict[str, Any]]:
    """The shuffled SFT corpus over train tasks: ``n_plain`` noisy-expert transcripts and
    ``n_referenced`` referenced ones. Deterministic in ``cfg.corpus_seed``.

    Each item: {kind: "plain" | "referenced", task_id, domain, template, reward, mistake,
    reference_task_id, messages}.
    """
    pools: dict[str, Words | None] = {"pseudo": None, "fresh": fresh_word}
    if cfg.rename_pool not in pools:
        raise ValueError(f"rename_pool must be one of {sorted(pools)}, not {cfg.rename_pool!r}")
    pool = pools[cfg.rename_pool]
    rng = random.Random(f"base-corpus:{cfg.corpus_seed}")
    tasks = [t.task_id for t in env.all_tasks() if t.split == "train"]
    if not tasks:
        raise ValueError("the world has no train tasks")
    framing = reference_framing()
    items = []
    for i in range(cfg.n_plain + cfg.n_referenced):
        tid = tasks[rng.randrange(len(tasks))]
        if i < cfg.n_plain:
            traj, kind = noisy_expert(env, tid, rng, cfg.success or None), "plain"
        else:
            traj = referenced_trajectory(env, tid, rng, framing=framing,
                                         max_result_chars=cfg.reference_result_chars)
            kind = "referenced"
        renamed = rng.random() < cfg.rename_fraction
        if renamed:
            traj.messages = rename_entities(traj.messages, rng, pool)
        items.append({"kind": kind, "renamed": renamed, "task_id": traj.task_id, "domain": traj.domain, "template": traj.template,
                      "reward": traj.reward, "mistake": traj.mistake,
                      "reference_task_id": traj.reference_task_id, "messages": traj.messages})
    rng.shuffle(items)
    return items


# ---- cache --------------------------------------------------------------------------------------
def base_dir(cfg: BaseModelConfig, cache_dir: str | os.PathLike | None = None) -> Path:
    """Where the base of ``cfg`` lies (or will)."""
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    return root / "base" / f"{cfg.preset}-{config_key(cfg)}"


def _log(progress: bool, msg: str) -> None:
    if progress:
        print(msg, flush=True)


def new_model(cfg: BaseModelConfig, tok: Any):
    """A freshly initialised tiny Qwen3 of ``cfg.preset`` for ``tok``, with ``cfg.rope_theta``."""
    import torch
    from transformers import GenerationConfig, Qwen3ForCausalLM

    from harness.models import tiny_config

    mcfg = tiny_config(cfg.preset, tok)
    mcfg.rope_parameters = {**(getattr(mcfg, "rope_parameters", None) or {}), "rope_type": "default",
                            "rope_theta": float(cfg.rope_theta)}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.model_seed)
        model = Qwen3ForCausalLM(mcfg)
    model.generation_config = GenerationConfig(eos_token_id=mcfg.eos_token_id, pad_token_id=mcfg.pad_token_id)
    return model.eval()


def build_base(cfg: BaseModelConfig, out_dir: str | os.PathLike, *, progress: bool = True) -> dict[str, Any]:
    """Build the base into ``out_dir`` (world, corpus, tokenizer, pretrain, save). Returns its info."""
    import torch

    from harness.models import count_parameters, save_pretrained

    t0 = time.perf_counter()
    env = make_env(cfg, split="train")
    corpus = build_corpus(env, cfg)
    t_corpus = time.perf_counter() - t0
    _log(progress, f"[base] corpus: {len(corpus)} transcripts in {t_corpus:.1f}s")
    if cfg.tokenizer != "bpe":
        raise ValueError(f"tokenizer must be 'bpe', not {cfg.tokenizer!r}")
    keys = corpus_keys(corpus) if cfg.key_tokens else ()
    tok = build_base_tokenizer(corpus, cfg.vocab_size, keys=keys)
    examples = encode_corpus(tok, corpus)
    t_tok = time.perf_counter() - t0 - t_corpus
    lengths = sorted(len(e) for e in examples)
    model = new_model(cfg, tok)
    n_params = count_parameters(model)
    _log(progress, f"[base] tokenizer {len(tok)} tokens; {len(examples)} sequences, median "
                   f"{lengths[len(lengths) // 2]} tokens, {sum(lengths):,} in all; model {cfg.preset} "
                   f"{n_params:,} parameters")
    drill, result = _fit_base(model, tok, keys, examples, cfg, progress)
    out = Path(out_dir)
    save_pretrained(model, tok, out)
    info = {
        "version": BASE_VERSION, "key": config_key(cfg), "config": plain_config(cfg), "world_fingerprint": fingerprint(),
        "parameters": n_params, "vocab": len(tok), "corpus": corpus_stats(corpus),
        "sequence_tokens": {"min": lengths[0], "median": lengths[len(lengths) // 2], "max": lengths[-1],
                            "total": sum(lengths)},
        "pretrain": result.summary(), "losses": [round(x, 4) for x in result.losses],
        "copy_drills": drill.summary() if drill else None,
        "seconds": {"corpus": round(t_corpus, 2), "tokenizer": round(t_tok, 2),
                    "copy_drills": round(drill.seconds, 2) if drill else 0.0,
                    "pretrain": round(result.seconds, 2), "total": round(time.perf_counter() - t0, 2)},
        "torch_threads": torch.get_num_threads(), "built_at": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    (out / "base_info.json").write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    write_model_defaults(out, base_defaults(cfg, model.config.max_position_embeddings))
    return info


def base_defaults(cfg: BaseModelConfig, context: int) -> ModelDefaults:
    """What the base of ``cfg`` was trained to play (its ``lopd_defaults.json``): its world and prompt, and
    the turn length and count it was measured with (:class:`~harness.basemodel.measure.EvalConfig`)."""
    from harness.basemodel.measure import EvalConfig

    ec = EvalConfig()
    return ModelDefaults(env=ModelEnv("lopd/micro-v0", env_kwargs(cfg)), max_new_tokens=ec.max_new_tokens,
                         max_turns=ec.max_turns, max_context_tokens=context)


def _fit_base(model: Any, tok: Any, keys: tuple[str, ...], examples: list[Example], cfg: BaseModelConfig,
              progress: bool) -> tuple[PretrainResult | None, PretrainResult]:
    """Pretrain ``model`` in place: first on ``cfg.n_copy_drills`` copy drills (one flat-lr epoch, no
    context loss, small batches), then on ``examples`` plus ``cfg.mixed_drills`` more drills.
    Returns the drills' result (None without drills) and the fit's."""
    pcfg = copy.deepcopy(cfg.pretrain)
    pcfg.progress = pcfg.progress and progress

    def encoded_drills(n: int, seed: int) -> list[Example]:
        return [encode_conversation(tok, m)
                for m in copy_drills(n, seed, keys, fresh=cfg.rename_pool == "fresh")]

    drill = None
    if cfg.n_copy_drills > 0:
        drills = encoded_drills(cfg.n_copy_drills, cfg.corpus_seed)
        dcfg = copy.deepcopy(pcfg)
        dcfg.epochs, dcfg.context_weight, dcfg.min_lr_ratio = 1.0, 0.0, 1.0
        dcfg.batch_tokens = min(dcfg.batch_tokens, 512)  # short sequences: more, smaller steps
        drill = pretrain(model, drills, dcfg, pad_id=tok.pad_token_id)
        _log(progress, f"[base] copy drills: {drill.steps} steps in {drill.seconds:.1f}s, "
                       f"loss {drill.summary()['loss_first']} -> {drill.summary()['loss_last']}")
    fit = examples
    if cfg.mixed_drills > 0:
        fit = examples + encoded_drills(cfg.mixed_drills, cfg.corpus_seed + 1)
    result = pretrain(model, fit, pcfg, pad_id=tok.pad_token_id)
    _log(progress, f"[base] pretrained {result.steps} steps in {result.seconds:.1f}s: "
                   f"loss {result.summary()['loss_first']} -> {result.summary()['loss_last']}")
    return drill, result


def load_or_build_base(cfg: BaseModelConfig | dict[str, Any] | None = None, *,
                       cache_dir: str | os.PathLike | None = None, progress: bool = True):
    """``(model, tokenizer, info)`` of the base of ``cfg``: loaded from the cache, built on a miss.

    ``info`` is the build record (config, corpus stats, losses, timings) plus ``path`` and
    ``cached`` (True when this call loaded an existing build). On a cache miss the pinned base
    (:mod:`harness.basemodel.pin`) is copied into the cache when it was made from ``cfg`` for this
    world (``info["pinned"]``); otherwise the base is built. The build is atomic (a temp folder,
    then a rename), so parallel callers are safe; the loser of a race loads the winner's copy.
    """
    from harness.models import load_model

    cfg = as_config(cfg)
    target = base_dir(cfg, cache_dir)
    cached = (target / "base_info.json").is_file()
    from_pin = not cached and stale_reason(plain_config(cfg)) is None
    if from_pin:
        _log(progress, f"[base] no cached base; copying the pinned one ({pinned.PINNED_DIR})")
        copy_pinned(target)
    elif not cached:
        build_dir(target, lambda tmp: build_base(cfg, tmp, progress=progress), "base_info.json")
    model, tok = load_model(target)
    info = json.loads((target / "base_info.json").read_text(encoding="utf-8"))
    info.update(path=str(target), cached=cached, pinned=from_pin)
    return model, tok, info


def load_base_dir(path: str | os.PathLike) -> tuple[Any, Any, dict[str, Any]]:
    """``(model, tokenizer, info)`` of a built base folder (``info["config_obj"]``: its BaseModelConfig)."""
    from harness.models import load_model

    path = Path(path)
    if not (path / "base_info.json").is_file():
        raise FileNotFoundError(f"{path} is not a built base (no base_info.json)")
    info = json.loads((path / "base_info.json").read_text(encoding="utf-8"))
    model, tok = load_model(path)
    info.update(path=str(path), cached=True, config_obj=as_config(info["config"]))
    return model, tok, info




