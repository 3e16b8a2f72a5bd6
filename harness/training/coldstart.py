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


def train_composer(composer: Any, examples: list, cfg: TrainConfig, metrics: Path) -> None:
    """``cfg.lopd.coldstart.steps`` cold-start steps on batches drawn epoch by epoch from ``examples``,
    one ``metrics`` line each; then the warmed composer becomes its own anchor. The batches' order follows
    ``lopd.composer_seed``, not the run's seed: a cold start is a function of the composer settings, so one
    cached cold start serves every seed of a comparison."""
    from tqdm import tqdm

    from harness.metrics import MetricsLogger
    from harness.training.trainer import EpochSampler, derive_seed
    from lopd.coldstart import coldstart_step, make_coldstart_optimizer

    cs = cfg.lopd.coldstart
    opt = make_coldstart_optimizer(composer, cs)
    order_seed = derive_seed(cfg.lopd.composer_seed, "coldstart")
    sampler = EpochSampler([str(i) for i in range(len(examples))], order_seed)
    with MetricsLogger(metrics) as log:
        for step in tqdm(range(1, cs.steps + 1), desc="coldstart", disable=not cfg.log.progress):
            batch = [examples[int(i)] for i in sampler.take(cs.batch_size)]
            stats = coldstart_step(composer, batch, opt, cs)
            log.write({"step": step, **{f"coldstart/{k}": v for k, v in stats.items()}})
    composer.set_anchor()


def run_coldstart(cfg: TrainConfig, traces: Sequence[str], out: str | Path | None = None) -> Path:
    """Warm the composer of ``cfg`` on the pairs of ``traces`` and save its trainable weights (also its
    anchor) to ``out`` (default ``RUN_DIR/composer_coldstart.pt``); metrics go to
    ``RUN_DIR/coldstart_metrics.jsonl``. Returns the saved file."""
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
    train_composer(composer, examples, cfg, run_dir / "coldstart_metrics.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(composer.trainable_state_dict(), out)
    return out
