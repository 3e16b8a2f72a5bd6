"""The micro world's base model: the tiny default model pretrained on a corpus the world generates.

Pipeline (:func:`load_or_build_base`): build the world -> generate the SFT corpus (noisy-expert
trajectories and referenced trajectories) -> train the tokenizer on it -> pretrain the tiny Qwen3
(:mod:`harness.pretrain`) -> ``save_pretrained`` into the cache. The cache folder is keyed by a hash
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

Renaming, copy drills and the tokenizer live in :mod:`harness.base_corpus`. The tokenizer is the
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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from envs.micro.env import MicroEnv
from envs.micro.expert import noisy_expert, run_solver
from envs.micro.sft import experience_of, referenced_trajectory
from envs.micro.world import cache_root, fingerprint
from harness.atomic_dir import build_dir
from harness.base_corpus import (
    Words,
    build_base_tokenizer,
    copy_drills,
    corpus_keys,
    corpus_stats,
    encode_corpus,
    fresh_word,
    rename_entities,
)
from harness.pretrain import Example, PretrainConfig, PretrainResult, encode_conversation, pretrain
from lopd.latent import frame_user_message

BASE_VERSION = 2
"""Bump to invalidate every cached base and the pinned one (when the corpus or the fit changes in code
the config does not name; 2: references in the experience bank's format)."""


def reference_framing() -> str:
    """The text-reference framing: lopd.latent's framing with ``{reference}`` where the latents go.

    >>> f = reference_framing()
    >>> "{reference}" in f and "{task}" in f and f.startswith("Reference experience")
    True
    """
    return frame_user_message("{task}", sentinel="{reference}")


def frame_reference(task_text: str, reference: str) -> str:
    """The first user message with a text reference framed in (what the teachers' framing holds)."""
    return reference_framing().replace("{reference}", reference).replace("{task}", task_text)


def referenced_prompts(tokenizer: Any, task_ids: list[str], references: dict[str, str]):
    """A ``build_prompt`` for :func:`harness.rollout.rollout` over envs reset to ``task_ids`` in order:
    each task's reference framed into its first user message (a task without one plays without
    context). rollout builds each env's prompt once, in env order."""
    from harness.rollout import render_prompt

    queue = iter(task_ids)

    def build(messages: list[dict[str, Any]]) -> tuple[list[int], None]:
        msgs, ref = copy.deepcopy(messages), references.get(next(queue))
        if ref is not None:
            msgs[1]["content"] = frame_reference(str(msgs[1]["content"]), ref)
        return render_prompt(tokenizer, msgs), None

    return build


@dataclass
class BasePretrainConfig(PretrainConfig):
    """:class:`harness.pretrain.PretrainConfig` with the base model's defaults (as class defaults, so a
    ``pretrain.<field>=...`` override keeps the others)."""

    epochs: float = 3.0
    """Passes over the world corpus (and the mixed drills)."""
    batch_tokens: int = 1024
    """Most padded tokens in one batch (batch size x longest sequence)."""
    context_weight: float = 0.3
    """Weight of the next-token loss on prompt and tool-result tokens (see PretrainConfig)."""


@dataclass
class BaseModelConfig:
    """What the base model is made of. Every field is part of the cache key."""

    world_seed: int = 0
    """Seed of the micro world."""
    n_train: int = 600
    """Train tasks of the world (the corpus draws from these only)."""
    n_eval: int = 120
    """Held-out eval tasks (disjoint entities)."""
    prompt: str = "compact"
    """System prompt of the env: "compact" (summary + tool signatures) or "full" (authors + tools JSON)."""
    n_plain: int = 1600
    """Noisy-expert trajectories in the corpus."""
    n_referenced: int = 2400
    """Referenced trajectories in the corpus. They teach following a reference; more of them raise the
    reward with a reference and lower it without (docs/MICRO.md, "Fifth round")."""
    success: dict[str, float] = field(default_factory=dict)
    """Per-domain overrides of the noisy expert's probability of the right procedure (empty: defaults)."""
    corpus_seed: int = 0
    """Seed of the corpus draw."""
    rename_fraction: float = 0.8
    """Share of transcripts whose entity names (people, products, titles, cities, ...) are replaced,
    consistently within the transcript, by pseudo-words (``rename_pool``). The world has only a few
    dozen train names, which a tiny model memorises instead of learning to copy; renamed transcripts
    make copying the only way to predict them, so held-out names work too."""
    rename_pool: str = "fresh"
    """Words renamed entities and copy drills get: "fresh" (a new pseudo-word on every draw,
    base_corpus.fresh_word: nothing to learn by heart, so only copying predicts them) or "pseudo" (the
    fixed pool of 480 pseudo-words, which a base learns by heart and then finishes held-out names
    with; docs/MICRO.md, "Fourth round")."""
    n_copy_drills: int = 48000
    """Copy drills fitted before the world corpus (one epoch): a user message of random pseudo-names
    and ids that the assistant repeats. They grow the induction (copy) circuits that reading ids
    and names needs; a tiny model does not find them in the world corpus alone within the budget."""
    mixed_drills: int = 12000
    """Further copy drills shuffled into the world corpus's fit, so copying keeps being practised
    while the procedures are learnt."""
    reference_result_chars: int = 120
    """Tool results in a reference's experience text are cut to this many characters."""
    vocab_size: int = 2048
    """BPE vocabulary (before the markup tokens)."""
    tokenizer: str = "bpe"
    """The tokenizer's layout; "bpe" (:func:`harness.base_corpus.build_base_tokenizer`) is the only
    one: names and ids split into BPE pieces shared by both splits."""
    key_tokens: bool = True
    """One token per dict key as calls and results write it (``"owner": "``, ``'account_id': '``), and
    half of the copy drills become key-value recall drills over those keys: copying a value from
    after its key is then one induction step (docs/MICRO.md, "Third round")."""
    preset: str = "1m"
    """Tiny model preset (harness.models.PRESETS)."""
    rope_theta: float = 10000.0
    """RoPE base of the model (the presets use Qwen3's 1e6, made for 32K contexts; sequences here are
    a few hundred tokens, where a smaller base gives sharper relative positions)."""
    model_seed: int = 0
    """Seed of the model's initialisation."""
    pretrain: BasePretrainConfig = field(default_factory=lambda: BasePretrainConfig())
    """The supervised fit of the world corpus (the copy drills reuse it: one epoch, flat lr, no context
    loss, batches of at most 512 tokens)."""


def config_key(cfg: BaseModelConfig) -> str:
    """Hash of the config and of the generator code (world, corpus, tokenizer, model, fit)."""
    d = asdict(cfg)
    d["pretrain"].pop("progress", None)
    d["pretrain"].pop("threads", None)
    h = hashlib.sha256(json.dumps(d, sort_keys=True).encode())
    h.update(f"v{BASE_VERSION}:{fingerprint()}".encode())
    root = Path(__file__).resolve().parent.parent
    for rel in ("harness/base_model.py", "harness/base_corpus.py", "harness/pretrain.py", "harness/rollout.py",
                "harness/models/tokenizer.py", "harness/models/tiny.py", "harness/models/chat_template.jinja",
                "envs/micro/env.py", "envs/micro/expert.py", "envs/micro/sft.py", "lopd/latent.py",
                "envs/envscaler/env.py", "envs/envscaler/parse.py"):
        p = root / rel
        h.update(rel.encode() + b"\0" + (p.read_bytes() if p.is_file() else b"-"))
    return h.hexdigest()[:16]


def make_env(cfg: BaseModelConfig | dict[str, Any] | None = None, split: str | None = "train",
             **kwargs: Any) -> MicroEnv:
    """The micro env the base was trained for (same world and system prompt)."""
    cfg = _as_config(cfg)
    return MicroEnv(cfg.world_seed, cfg.n_train, cfg.n_eval, prompt=cfg.prompt, split=split, **kwargs)


def _as_config(cfg: BaseModelConfig | dict[str, Any] | None) -> BaseModelConfig:
    if cfg is None:
        return BaseModelConfig()
    if isinstance(cfg, BaseModelConfig):
        return cfg
    from harness.config import from_dict

    return from_dict(BaseModelConfig, cfg)


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
        "version": BASE_VERSION, "key": config_key(cfg), "config": _plain(cfg), "world_fingerprint": fingerprint(),
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
    return info


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


def _plain(cfg: BaseModelConfig) -> dict[str, Any]:
    d = asdict(cfg)
    d["pretrain"]["betas"] = list(d["pretrain"]["betas"])
    return d


def load_or_build_base(cfg: BaseModelConfig | dict[str, Any] | None = None, *,
                       cache_dir: str | os.PathLike | None = None, progress: bool = True):
    """``(model, tokenizer, info)`` of the base of ``cfg``: loaded from the cache, built on a miss.

    ``info`` is the build record (config, corpus stats, losses, timings) plus ``path`` and
    ``cached`` (True when this call loaded an existing build). On a cache miss the pinned base
    (:mod:`harness.pinned_base`) is copied into the cache when it was made from ``cfg`` for this
    world (``info["pinned"]``); otherwise the base is built. The build is atomic (a temp folder,
    then a rename), so parallel callers are safe; the loser of a race loads the winner's copy.
    """
    from harness import pinned_base
    from harness.models import load_model

    cfg = _as_config(cfg)
    target = base_dir(cfg, cache_dir)
    cached = (target / "base_info.json").is_file()
    pinned = not cached and pinned_base.stale_reason(_plain(cfg)) is None
    if pinned:
        _log(progress, f"[base] no cached base; copying the pinned one ({pinned_base.PINNED_DIR})")
        pinned_base.copy_pinned(target)
    elif not cached:
        build_dir(target, lambda tmp: build_base(cfg, tmp, progress=progress), "base_info.json")
    model, tok = load_model(target)
    info = json.loads((target / "base_info.json").read_text(encoding="utf-8"))
    info.update(path=str(target), cached=cached, pinned=pinned)
    return model, tok, info


# ---- evaluation ---------------------------------------------------------------------------------
def good_reference(env: MicroEnv, task_id: str, seed: int = 0, max_result_chars: int = 120) -> tuple[str, str]:
    """(reference task id, experience text): the expert's successful run on another train task of the
    same domain and template, chosen deterministically from ``(seed, task_id)``."""
    micro = env.task_by_id(task_id).data["scenario"]["micro"]
    pool = [t.task_id for t in env.all_tasks()
            if t.split == "train" and t.task_id != task_id
            and t.data["scenario"]["micro"]["domain"] == micro["domain"]
            and t.data["scenario"]["micro"]["template"] == micro["template"]]
    if not pool:
        raise ValueError(f"no train task shares the procedure of {task_id}")
    ref_id = random.Random(f"reference:{seed}:{task_id}").choice(sorted(pool))
    traj = run_solver(env, ref_id)
    if traj.reward < 1.0:
        raise RuntimeError(f"the expert failed the reference task {ref_id} (reward {traj.reward})")
    return ref_id, experience_of(traj, max_result_chars=max_result_chars)


@dataclass
class EvalConfig:
    """How the base is measured."""

    n_tasks: int = 120
    """Eval tasks (the first n of the eval split; 0 or more than exist: all)."""
    samples: int = 1
    """Episodes per task and condition."""
    temperature: float = 0.7
    """Sampling temperature; the defaults here are the learners' rollout sampling (TrainConfig.sampling),
    so the numbers are the policy as RL samples it."""
    top_p: float = 0.95
    """Nucleus sampling mass."""
    top_k: int = 20
    """Top-k cut (-1: off, as in SamplingParams)."""
    max_new_tokens: int = 96
    """Tokens per assistant turn."""
    max_turns: int = 8
    """Assistant turns per episode (every procedure ends within 6)."""
    batch_size: int = 64
    """Episodes played together through the engine."""
    seed: int = 0
    """Sampling and reference-choice seed."""
    threads: int = 1
    """torch intra-op threads while rolling out (0: leave torch's setting); see PretrainConfig.threads."""
    progress: bool = True
    """Show a tqdm bar."""


def evaluate_base(model: Any, tokenizer: Any, cfg: BaseModelConfig | dict[str, Any] | None = None,
                  ecfg: EvalConfig | None = None) -> dict[str, Any]:
    """Mean reward on held-out eval tasks by real rollouts (HFEngine + harness.rollout), without
    context and with a good reference in the privileged-context framing. Per-domain means too."""
    cfg, ecfg = _as_config(cfg), ecfg or EvalConfig()
    env0 = make_env(cfg, split=None)
    tasks = [t for t in env0.all_tasks() if t.split == "eval"]
    if 0 < ecfg.n_tasks < len(tasks):
        tasks = tasks[: ecfg.n_tasks]
    refs = {t.task_id: good_reference(env0, t.task_id, ecfg.seed, cfg.reference_result_chars)[1] for t in tasks}
    rewards, per_domain, turns, seconds = _play_eval(model, tokenizer, cfg, ecfg, tasks, refs)

    def mean(xs: list[float]) -> float:
        return round(sum(xs) / len(xs), 4) if xs else float("nan")

    return {
        "no_context": mean(rewards["no_context"]), "with_reference": mean(rewards["with_reference"]),
        "full_pass": {c: mean([float(r >= 1.0) for r in rs]) for c, rs in rewards.items()},
        "per_domain": {c: {d: mean(v) for d, v in sorted(ds.items())} for c, ds in per_domain.items()},
        "mean_turns": {c: mean([float(x) for x in v]) for c, v in turns.items()},
        "episodes": {c: len(v) for c, v in rewards.items()}, "tasks": len(tasks),
        "temperature": ecfg.temperature, "top_p": ecfg.top_p, "top_k": ecfg.top_k, "seconds": seconds,
    }


def _play_eval(model: Any, tokenizer: Any, cfg: BaseModelConfig, ecfg: EvalConfig, tasks: list[Any],
               refs: dict[str, str]) -> tuple[dict, dict, dict, float]:
    """Each task ``ecfg.samples`` times per condition (``no_context``, then ``with_reference``: its
    text reference framed in). Returns per condition the rewards, the rewards per domain and the
    turns of every episode, and the seconds the rollouts took."""
    import torch

    from harness.engines import HFEngine, SamplingParams
    from harness.rollout import RolloutConfig, rollout

    engine = HFEngine(model, tokenizer)
    rcfg = RolloutConfig(max_turns=ecfg.max_turns)
    domain = {t.task_id: t.data["scenario"]["micro"]["domain"] for t in tasks}
    ids = [t.task_id for t in tasks for _ in range(ecfg.samples)]
    rewards: dict[str, list[float]] = {"no_context": [], "with_reference": []}
    per_domain: dict[str, dict[str, list[float]]] = {c: {} for c in rewards}
    turns: dict[str, list[int]] = {c: [] for c in rewards}
    envs = [make_env(cfg, split=None, max_steps=ecfg.max_turns) for _ in range(min(ecfg.batch_size, len(ids)))]
    bar = None
    if ecfg.progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=2 * len(ids), desc="eval base", unit="ep", dynamic_ncols=True)
    t0 = time.perf_counter()
    old_threads = torch.get_num_threads()
    if ecfg.threads > 0:
        torch.set_num_threads(ecfg.threads)
    try:
        for cond in rewards:
            for start in range(0, len(ids), ecfg.batch_size):
                chunk = ids[start:start + ecfg.batch_size]
                sampling = SamplingParams(temperature=ecfg.temperature, top_p=ecfg.top_p, top_k=ecfg.top_k,
                                          max_new_tokens=ecfg.max_new_tokens,
                                          seed=ecfg.seed * 7919 + start)
                trajs = rollout(envs[: len(chunk)], engine, tokenizer, sampling=sampling, config=rcfg,
                                options=[{"task_id": tid} for tid in chunk],
                                build_prompt=referenced_prompts(tokenizer, chunk, refs) if cond == "with_reference" else None)
                for tid, tr in zip(chunk, trajs):
                    r = float(tr.episode.reward)
                    rewards[cond].append(r)
                    per_domain[cond].setdefault(domain[tid], []).append(r)
                    turns[cond].append(len(tr.episode.steps))
                if bar is not None:
                    bar.update(len(chunk))
    finally:
        torch.set_num_threads(old_threads)
        if bar is not None:
            bar.close()
    return rewards, per_domain, turns, round(time.perf_counter() - t0, 2)
