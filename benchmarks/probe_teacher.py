"""Probe: how good is each self-teacher as a policy? Held-out reward of the frozen base under the
contexts the learners' teachers see, by real rollouts.

    python benchmarks/probe_teacher.py BASE_DIR --bank BANK_DIR [--composer composer.pt ...]

Conditions (each task played ``--samples`` times at the rollout temperature):

* ``none``: the plain prompt (the student before training);
* ``oracle``: the scripted expert's run on another train task of the same template, framed as text
  (what the base was pretrained to use; OPSD's teacher sees a bank trajectory this way);
* ``retrieved``: the top-1 bank experience of the task, framed as text (what retrieval offers);
* ``latent:<file>``: the top-``--retrieve`` bank experiences through a composer (``lopd coldstart``
  output) into latents, spliced into the frozen base, i.e. LOPD's teacher at the start of RL.

A self-distillation teacher can only lift the student as far as its own policy is better than the
student's; a latent teacher that scores like ``none`` carries no usable context. The report also says
how often the top-1 retrieved experience shares the task's template (the retrieval's precision).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from harness.base_model import good_reference, make_env, referenced_prompts
from harness.demo import load_base_dir


def _micro(env: Any, task_id: str) -> tuple[str, str]:
    m = env.task_by_id(task_id).data["scenario"]["micro"]
    return m["domain"], m["template"]


def probe(base_dir: str, bank_dir: str, composers: list[str], n_tasks: int = 60, samples: int = 2,
          retrieve: int = 3, temperature: float = 0.7, composer_overrides: list[str] | None = None,
          embedder: str = "model", seed: int = 0) -> dict[str, Any]:
    """The report dict: ``conditions`` (reward and full-pass rate each), ``top1_same_template``."""
    from harness.config import load_config
    from harness.engines import EmbedOverride, HFEngine, SamplingParams
    from harness.learners.latent_teacher import latent_teacher_prompt
    from harness.learners.privileged import HashingEmbedder
    from harness.rollout import RolloutConfig, rollout
    from harness.train_config import TrainConfig
    from harness.trainer import example_config
    from lopd.bank import ExperienceBank
    from lopd.composer import Composer

    model, tok, info = load_base_dir(base_dir)
    bcfg = info["config_obj"]
    env0 = make_env(bcfg, split=None)
    tasks = [t for t in env0.all_tasks() if t.split == "eval"][:n_tasks]
    bank = ExperienceBank.load(Path(bank_dir) / "bank", embedder=HashingEmbedder() if embedder == "hashing" else None)
    env_id = bank.experiences[0].env_id if len(bank) else None
    hits = bank.search([t.prompt for t in tasks], k=retrieve, env=env_id, task_ids=[t.task_id for t in tasks])
    exps = {t.task_id: [h.experience.text for h in row] for t, row in zip(tasks, hits)}
    same = [bool(row) and _micro(env0, row[0].experience.task_id) == _micro(env0, t.task_id) for t, row in zip(tasks, hits)]
    oracle = {t.task_id: good_reference(env0, t.task_id, seed, bcfg.reference_result_chars)[1] for t in tasks}
    engine = HFEngine(model, tok)
    rcfg = RolloutConfig(max_turns=8)
    ids = [t.task_id for t in tasks for _ in range(samples)]
    envs = [make_env(bcfg, split=None, max_steps=8) for _ in ids]

    lcfg = load_config(TrainConfig, example_config("lopd"), list(composer_overrides or [])).lopd  # the composers' settings

    def latent_prompt(latents: dict[str, torch.Tensor]):
        queue = iter(ids)

        def build(messages: list[dict[str, Any]]) -> tuple[list[int], EmbedOverride | None]:
            lat = latents[next(queue)]
            p_ids, pos = latent_teacher_prompt(tok, SimpleNamespace(messages=messages), lat.shape[0], lcfg.framing, {})
            return p_ids, EmbedOverride(positions=pos, embeds=lat)
        return build

    conditions: dict[str, Any] = {"none": None, "oracle": referenced_prompts(tok, ids, oracle),
                                  "retrieved": referenced_prompts(tok, ids, {k: v[0] for k, v in exps.items() if v})}
    for path in composers:
        frozen, _, _ = load_base_dir(base_dir)
        comp = Composer(frozen, tok, lcfg.composer)
        comp.load_trainable_state_dict(torch.load(path, map_location="cpu"))
        comp.eval()
        with torch.no_grad():
            lats = comp.encode([t.prompt for t in tasks], [exps[t.task_id] for t in tasks])
        conditions[f"latent:{path}"] = latent_prompt({t.task_id: x.detach() for t, x in zip(tasks, lats)})

    out: dict[str, Any] = {"tasks": len(tasks), "samples": samples, "temperature": temperature,
                           "top1_same_template": round(sum(same) / len(same), 3), "conditions": {}}
    for name, build in conditions.items():
        sampling = SamplingParams(temperature=temperature, top_p=0.95, top_k=20, max_new_tokens=96, seed=seed)
        trajs = rollout(envs, engine, tok, sampling=sampling, config=rcfg,
                        options=[{"task_id": tid} for tid in ids], build_prompt=build)
        rs = [float(tr.episode.reward) for tr in trajs]
        out["conditions"][name] = {"reward": round(statistics.fmean(rs), 4),
                                   "full_pass": round(statistics.fmean(r >= 1.0 for r in rs), 4)}
        print(f"{name:>40s}: reward {out['conditions'][name]['reward']:.3f}  "
              f"full pass {out['conditions'][name]['full_pass']:.3f}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", help="a built base folder (holding base_info.json)")
    ap.add_argument("--bank", required=True, help="a demo bank folder (holding bank/)")
    ap.add_argument("--composer", nargs="*", default=[], help="cold-start composer files")
    ap.add_argument("--tasks", type=int, default=60)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--retrieve", type=int, default=3)
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="TrainConfig overrides of the composers' settings, e.g. lopd.composer.qformer.n_latents=8")
    ap.add_argument("--embedder", default="model", choices=("model", "hashing"), help="the bank's retrieval embedder")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--json", help="write the result here too")
    args = ap.parse_args()
    torch.set_num_threads(1)
    res = probe(args.base, args.bank, args.composer, args.tasks, args.samples, args.retrieve, args.temperature,
                args.set, args.embedder)
    print(json.dumps(res, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
