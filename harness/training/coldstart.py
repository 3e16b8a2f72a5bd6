"""The composer's cold start as a run of a :class:`~harness.training.train_config.TrainConfig`: the student and
its composer, the (retrieved experiences -> successful trajectory) pairs of some traces, the steps of
:func:`lopd.coldstart.coldstart_step`, the saved weights. ``lopd coldstart`` (:mod:`harness.cli.coldstart`)
and the stages of ``lopd prepare`` and the demo (:mod:`harness.prepare.stages`) call :func:`run_coldstart`; :mod:`lopd.coldstart` is the method.

The ``cfg.lopd`` settings it reads are ``coldstart``, ``composer``, ``composer_seed`` (here) and
``n_retrieved``, ``allow_self_retrieval``, ``framing`` (:func:`build_examples`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.training.train_config import TrainConfig


def build_examples(cfg: TrainConfig, tokenizer: Any, bank: Any, traces: Sequence[str],
                   n_latents: int) -> tuple[list, dict[str, int]]:
    """Cold-start examples from the successful training episodes of ``traces``, and counts of what
    was skipped."""
    from envs.trace import read_traces
    from harness.learners.common import conversation_tokens, prompt_messages
    from harness.learners.latent_teacher import latent_teacher_prompt
    from harness.learners.privileged import retrieve_texts
    from harness.rollout import episode_tokens, render_prompt
    from lopd.bank.render import task_text
    from lopd.coldstart import ColdStartExample

    examples, skipped = [], {"split_or_reward": 0, "no_retrieval": 0, "no_task": 0}
    min_reward, splits = cfg.lopd.coldstart.min_reward, set(bank.config.train_splits)
    tk = dict(cfg.rollout.template_kwargs)
    for path in traces:
        for ep in read_traces(path, on_error="skip"):
            if ep.split not in splits or not ep.reward >= min_reward:
                skipped["split_or_reward"] += 1
                continue
            task = task_text(ep)
            if task is None:
                skipped["no_task"] += 1
                continue
            texts = retrieve_texts(bank, [task], [ep.task_id], ep.env_id, cfg.lopd)[0]
            if not texts:
                skipped["no_retrieval"] += 1
                continue
            if ep.prompt_token_ids is not None and all(s.token_ids is not None for s in ep.steps):
                ids, mask, _ = episode_tokens(ep)
                n_prompt = len(ep.prompt_token_ids)
            else:
                ids, mask = conversation_tokens(tokenizer, ep.messages, tk)
                n_prompt = len(render_prompt(tokenizer, prompt_messages(ep), **tk))
            tp = latent_teacher_prompt(tokenizer, ep, len(texts) * n_latents, cfg.lopd.framing, tk)
            if tp is None:
                skipped["no_task"] += 1
                continue
            examples.append(ColdStartExample(task=task, experiences=texts,
                                             input_ids=tp[0] + ids[n_prompt:], latent_positions=tp[1],
                                             loss_mask=[0] * len(tp[0]) + mask[n_prompt:]))
    return examples, skipped


def load_composer(cfg: TrainConfig) -> tuple[Any, Any]:
    """``(composer, tokenizer)``: the student of ``cfg`` (seeded by ``cfg.seed``) under a new composer
    (seeded by ``cfg.lopd.composer_seed``), on the configured device."""
    import torch

    from harness.training.trainer import load_student, resolve_device
    from lopd.composer import Composer

    device = torch.device(resolve_device(cfg.model.device))
    torch.manual_seed(cfg.seed)
    base, tok = load_student(cfg, device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.lopd.composer_seed)
        composer = Composer(base, tok, cfg.lopd.composer).to(device)
    return composer, tok


def train_composer(composer: Any, examples: list, cfg: TrainConfig, metrics: Path,
                   checkpoint: Path | None = None, every: int = 0) -> None:
    """``cfg.lopd.coldstart.steps`` cold-start steps on batches drawn epoch by epoch from ``examples``,
    one ``metrics`` line each; then the warmed composer becomes its own anchor. The batches' order follows
    ``lopd.composer_seed``, not the run's seed: a cold start is a function of the composer settings, so one
    cached cold start serves every seed of a comparison.

    With ``checkpoint``, the state (composer, optimiser, batch order, RNG) is saved there every ``every``
    steps and a saved one is resumed from: a resumed cold start computes the same weights as an unbroken one."""
    from tqdm import tqdm

    from harness.metrics import MetricsLogger
    from harness.training.sampler import EpochSampler, derive_seed
    from lopd.coldstart import coldstart_step, make_coldstart_optimizer

    cs = cfg.lopd.coldstart
    opt = make_coldstart_optimizer(composer, cs)
    order_seed = derive_seed(cfg.lopd.composer_seed, "coldstart")
    sampler = EpochSampler([str(i) for i in range(len(examples))], order_seed)
    shape = {"examples": _fingerprint(examples), "steps": cs.steps, "batch_size": cs.batch_size} if checkpoint else {}
    rows = load_checkpoint(checkpoint, shape, composer, opt, sampler) if checkpoint else []
    start = len(rows)
    metrics.unlink(missing_ok=True)
    with MetricsLogger(metrics) as log:
        for row in rows:
            log.write(row)
        for step in tqdm(range(start + 1, cs.steps + 1), desc="coldstart", initial=start, total=cs.steps,
                         disable=not cfg.log.progress):
            batch = [examples[int(i)] for i in sampler.take(cs.batch_size)]
            stats = coldstart_step(composer, batch, opt, cs)
            rows.append({"step": step, **{f"coldstart/{k}": v for k, v in stats.items()}})
            log.write(rows[-1])
            if checkpoint and every > 0 and step % every == 0 and step < cs.steps:
                save_checkpoint(checkpoint, shape, rows, composer, opt, sampler)
    composer.set_anchor()
    if checkpoint and start < cs.steps:  # a finished one resumed is left as it is (a committed file stays clean)
        save_checkpoint(checkpoint, shape, rows, composer, None, sampler)


def _fingerprint(examples: list) -> str:
    """What identifies the pairs a checkpoint was trained on: their count and a hash of their tokens."""
    import hashlib
    import json

    data = json.dumps([[e.task, e.experiences, e.input_ids, e.loss_mask] for e in examples]).encode()
    return f"{len(examples)}:{hashlib.sha256(data).hexdigest()[:16]}"


def _optimizers(opt: Any) -> dict[str, Any]:
    return opt if isinstance(opt, dict) else {"all": opt}


def save_checkpoint(path: Path, shape: dict[str, int], rows: list[dict], composer: Any, opt: Any,
                    sampler: Any) -> None:
    """Write the cold start's state after ``len(rows)`` steps (``rows``: their metric lines) to ``path``
    atomically; a finished one (``opt`` None) without the optimiser's state, which nothing reads again."""
    import os

    import torch

    state = {"version": 1, "shape": shape, "step": len(rows), "metrics": rows,
             "composer": composer.trainable_state_dict(), "sampler": sampler.state_dict(), "rng": torch.get_rng_state(),
             "optim": None if opt is None else {k: o.state_dict() for k, o in _optimizers(opt).items()}}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: Path, shape: dict[str, int], composer: Any, opt: Any, sampler: Any) -> list[dict]:
    """Restore a saved cold start into ``composer``, ``opt`` and ``sampler``; returns the metric lines of its
    steps (none when ``path`` does not exist). A checkpoint of another cold start (other pairs, steps or
    batch size) is an error, not silently resumed."""
    import torch

    if not path.is_file():
        return []
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a truncated or foreign file
        raise ValueError(f"cold-start checkpoint {path} cannot be read ({e}); delete it to start over") from e
    if not isinstance(state, dict) or state.get("version") != 1 or state.get("shape") != shape:
        got = state.get("shape") if isinstance(state, dict) else None
        raise ValueError(f"cold-start checkpoint {path} is of another cold start ({got}, this one {shape}); "
                         "delete it to start over")
    composer.load_trainable_state_dict(state["composer"])
    sampler.load_state_dict(state["sampler"])
    torch.set_rng_state(state["rng"])
    if state["optim"] is not None:
        for k, o in _optimizers(opt).items():
            o.load_state_dict(state["optim"][k])
    print(f"cold start: resumed at step {state['step']} of {shape['steps']} from {path}")
    return list(state["metrics"])


def run_coldstart(cfg: TrainConfig, traces: Sequence[str], out: str | Path | None = None,
                  checkpoint: str | Path | None = None, every: int = 50) -> Path:
    """Warm the composer of ``cfg`` on the pairs of ``traces`` and save its trainable weights (also its
    anchor) to ``out`` (default ``RUN_DIR/composer_coldstart.pt``); metrics go to
    ``RUN_DIR/coldstart_metrics.jsonl``. With ``checkpoint``, resumable from that file, saved every
    ``every`` steps (:func:`train_composer`). Returns the saved file."""
    import torch

    from harness.learners.privileged import load_bank

    composer, tok = load_composer(cfg)
    bank = load_bank(cfg.bank)
    examples, skipped = build_examples(cfg, tok, bank, traces, composer.n_latents)
    if not examples:
        raise ValueError(f"no cold-start pair: every episode was skipped ({skipped}); the traces need "
                         "successful training episodes and the bank experiences of other tasks")
    cs = cfg.lopd.coldstart
    print(f"cold start: {len(examples)} pairs (skipped {skipped}), {cs.steps} steps of {cs.batch_size}")
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    out = Path(out) if out else run_dir / "composer_coldstart.pt"
    train_composer(composer, examples, cfg, run_dir / "coldstart_metrics.jsonl",
                   Path(checkpoint) if checkpoint else None, every)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(composer.trainable_state_dict(), out)
    return out
