"""Probe: does a micro-world base copy names and ids? Teacher-forced next-token accuracy on the
assistant tokens of the scripted expert's correct transcripts, split by kind of token.

    python benchmarks/probe_copy.py ~/.cache/lopd/base/1m-<key>             # held-out tasks
    python benchmarks/probe_copy.py <base dir> --split train --rename       # train tasks, renamed

Kinds: ``word`` (a whole-word token: a name, title, product, ...), ``number`` (an id's or amount's
number token, or a digit) and ``other`` (markup, JSON keys, tool names). A base that has learnt the
procedures but cannot copy scores high on ``other`` and near zero on ``word``; rollouts then fail
every check (each needs a copied name or id). The kinds are meant for bases built with the former
``tokenizer="words"`` option (docs/MICRO.md, "Building the micro-world base"; such a base still
loads); in a "bpe" base, the only kind the code now builds, a name is several pieces, counted as
``other``.
"""

from __future__ import annotations

import argparse
import json
import random
import re

import torch

from envs.micro.domains.base import FIRST_NAMES, LAST_NAMES
from envs.micro.expert import run_solver
from envs.micro.world import all_vocab
from harness.basemodel.corpus import name_pool, rename_entities
from harness.basemodel.config import make_env
from harness.basemodel.build import load_base_dir
from harness.basemodel.pretrain import encode_conversation


def whole_words() -> set[str]:
    """The words a ``tokenizer="words"`` base kept as single tokens: every word (two letters or more)
    of the world's vocabulary, both splits, and of the pseudo-word pool, lower and capitalised, with
    and without a leading space."""
    words = {w.lower() for lst in [FIRST_NAMES, LAST_NAMES, *all_vocab().values()] for e in lst
             for w in re.findall(r"[A-Za-z]{2,}", e)} | set(name_pool())
    words |= {w[:1].upper() + w[1:] for w in words}
    return words | {" " + w for w in words}


def copy_accuracy(model, tok, env, task_ids: list[str], rename: bool = False) -> dict[str, dict[str, float]]:
    """{kind: {"accuracy": ..., "tokens": ...}} over the assistant tokens of the expert's transcripts."""
    words = set(whole_words())
    hits: dict[str, list[int]] = {}
    for tid in task_ids:
        msgs = run_solver(env, tid).messages
        if rename:
            msgs = rename_entities(msgs, random.Random(tid))
        ex = encode_conversation(tok, msgs)
        with torch.no_grad():
            pred = model(torch.tensor([ex.ids])).logits[0].argmax(-1)
        for i in range(1, len(ex.ids)):
            if ex.mask[i]:
                text = tok.decode([ex.ids[i]])
                kind = "word" if text in words else "number" if text.isdigit() else "other"
                h = hits.setdefault(kind, [0, 0])
                h[0] += int(pred[i - 1].item() == ex.ids[i])
                h[1] += 1
    return {k: {"accuracy": round(a / n, 4), "tokens": n} for k, (a, n) in sorted(hits.items())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", help="a built base folder (holding base_info.json)")
    ap.add_argument("--split", default="eval", choices=("train", "eval"))
    ap.add_argument("--tasks", type=int, default=60)
    ap.add_argument("--rename", action="store_true", help="rename the entities (as the corpus does)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    model, tok, info = load_base_dir(args.base)
    env = make_env(info["config_obj"], split=args.split)
    ids = [t.task_id for t in env.all_tasks() if t.split == args.split][: args.tasks]
    print(json.dumps(copy_accuracy(model.eval(), tok, env, ids, rename=args.rename)))


if __name__ == "__main__":
    main()
