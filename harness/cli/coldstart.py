"""``lopd coldstart CONFIG.yaml --traces FILE ...``: warm the LOPD composer before RL.

Each pair is (the top-k bank experiences of a task -> a successful trajectory of the base model
on that task); the composer's latents replace the sentinel's placeholder run in the teacher's
prompt and the frozen base (adapter disabled) is trained to predict the trajectory's assistant
tokens (next-token NLL; only the LoRA and the QFormer learn). Settings come from the same
config as ``lopd train`` (``lopd.coldstart.*``, ``lopd.composer.*``, ``bank.*``)::

    lopd coldstart harness/configs/lopd.yaml --traces runs/base/traces.jsonl lopd.coldstart.steps=200
    lopd train harness/configs/lopd.yaml lopd.composer_init=runs/lopd/composer_coldstart.pt

The output file holds the composer's trainable weights, which are also the anchor c_phi0.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("coldstart", help="warm the LOPD composer on (experiences -> successful trajectory) pairs")
    p.add_argument("config", nargs="?", help="YAML config (the lopd train config)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides")
    p.add_argument("--traces", nargs="+", required=True, metavar="FILE",
                   help="trace JSONL files with successful base-model episodes (training split)")
    p.add_argument("--out", default=None, help="output file (default: RUN_DIR/composer_coldstart.pt)")
    p.set_defaults(func=run)


def build_examples(cfg: Any, tokenizer: Any, bank: Any, traces: list[str], n_latents: int) -> tuple[list, dict[str, int]]:
    """Cold-start examples from the successful training episodes of ``traces``, and counts of what was skipped."""
    from envs.trace import read_traces
    from harness.learners.common import conversation_tokens, prompt_messages
    from harness.learners.lopd import latent_teacher_prompt
    from harness.rollout import episode_tokens, render_prompt
    from lopd.bank.render import task_text
    from lopd.coldstart import ColdStartExample

    examples, skipped = [], {"split_or_reward": 0, "no_retrieval": 0, "no_task": 0}
    min_reward, splits = bank.config.min_reward, set(bank.config.train_splits)
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
            hits = bank.search([task], k=cfg.lopd.n_retrieved, env=ep.env_id, task_ids=[ep.task_id],
                               exclude_self=not cfg.lopd.allow_self_retrieval)[0]
            if not hits:
                skipped["no_retrieval"] += 1
                continue
            if ep.prompt_token_ids is not None and all(s.token_ids is not None for s in ep.steps):
                ids, mask, _ = episode_tokens(ep)
                n_prompt = len(ep.prompt_token_ids)
            else:
                ids, mask = conversation_tokens(tokenizer, ep.messages, tk)
                n_prompt = len(render_prompt(tokenizer, prompt_messages(ep), **tk))
            tp = latent_teacher_prompt(tokenizer, ep, len(hits) * n_latents, cfg.lopd.framing, tk)
            if tp is None:
                skipped["no_task"] += 1
                continue
            examples.append(ColdStartExample(task=task, experiences=[h.experience.text for h in hits],
                                             input_ids=tp[0] + ids[n_prompt:], latent_positions=tp[1],
                                             loss_mask=[0] * len(tp[0]) + mask[n_prompt:]))
    return examples, skipped


def run(args: argparse.Namespace) -> int:
    import torch
    from tqdm import tqdm

    from harness.config import config_and_overrides, load_config
    from harness.learners.privileged import load_bank
    from harness.metrics import MetricsLogger
    from harness.train_config import TrainConfig
    from harness.trainer import EpochSampler, derive_seed, load_student, resolve_device
    from lopd.coldstart import coldstart_step, make_coldstart_optimizer
    from lopd.composer import Composer

    path, overrides = config_and_overrides(args.config, args.overrides)
    cfg = load_config(TrainConfig, path, overrides)
    cs = cfg.lopd.coldstart
    device = torch.device(resolve_device(cfg.model.device))
    torch.manual_seed(cfg.seed)
    base, tok = load_student(cfg, device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.lopd.composer_seed)
        composer = Composer(base, tok, cfg.lopd.composer).to(device)
    bank = load_bank(cfg.bank)
    examples, skipped = build_examples(cfg, tok, bank, args.traces, composer.n_latents)
    if not examples:
        raise ValueError(f"no cold-start pair: every episode was skipped ({skipped}); the traces need successful "
                         "training episodes and the bank experiences of other tasks")
    print(f"cold start: {len(examples)} pairs (skipped {skipped}), {cs.steps} steps of {cs.batch_size}")
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    out = Path(args.out) if args.out else run_dir / "composer_coldstart.pt"
    opt = make_coldstart_optimizer(composer, cs)
    sampler = EpochSampler([str(i) for i in range(len(examples))], derive_seed(cfg.seed, "coldstart"))
    with MetricsLogger(run_dir / "coldstart_metrics.jsonl") as log:
        for step in tqdm(range(1, cs.steps + 1), desc="coldstart", disable=not cfg.log.progress):
            batch = [examples[int(i)] for i in sampler.take(cs.batch_size)]
            log.write({"step": step, **{f"coldstart/{k}": v for k, v in coldstart_step(composer, batch, opt, cs).items()}})
    composer.set_anchor()
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(composer.trainable_state_dict(), out)
    print(f"wrote {out}; train with lopd.composer_init={out}")
    return 0
