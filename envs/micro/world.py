"""Build the micro world as EnvScaler records: one env record per domain, one scenario per task.

Everything is a function of the seed: the vocabulary split (disjoint train and eval entities)
and every task (task ``i`` of a split depends only on ``(seed, split, i)``, so asking for more
tasks never changes the earlier ones). Task ``i`` belongs to domain ``i % 6``.

>>> files = build_world(seed=0, n_train=12, n_eval=6, out_dir=tempfile.mkdtemp())  # doctest: +SKIP
>>> env = EnvScalerEnv(files.envs, files.scenarios)                                 # doctest: +SKIP

Scenario records carry two fields beyond EnvScaler's: ``split`` ("train" or "eval") and ``micro``
({domain, template, params}: what the scripted solvers read; never ids).

A task's text ends with a ``Values:`` line: the arguments the task text supplies, written as they
appear in a call (``"owner": "Gus Ortiz", "reason": "lost card"``). The procedure, the order of the
calls and every id stay for the agent to find; only copying a name out of free prose is taken away,
which a tiny model cannot learn in a CPU budget (benchmarks/RESULTS.md, "Micro-world base model").
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import os
import random
import shutil
import tempfile
import textwrap
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from envs.micro.domains import DOMAINS
from envs.micro.domains.base import Domain, TaskSpec, split_vocab, tool_names
from envs.tools import function_schema

WORLD_VERSION = 2
DEFAULT_N_TRAIN = 600
DEFAULT_N_EVAL = 120
CACHE_ENV_VAR = "LOPD_CACHE_DIR"
SPLITS = ("train", "eval")


@dataclass(frozen=True)
class WorldFiles:
    """Where a built world lies."""

    root: Path
    envs: Path
    """envs.jsonl: one EnvScaler env record per domain."""
    scenarios: Path
    """scenarios.jsonl: every task of both splits."""
    manifest: Path
    """manifest.json: seed, sizes, version, fingerprint."""


def env_record(domain: Domain) -> dict[str, Any]:
    """The EnvScaler env record of a domain: its class source as env_class_code, its tool schemas."""
    cls = domain.env_class
    code = textwrap.dedent(inspect.getsource(cls))
    return {
        "env_id": domain.env_id,
        "environment_summary": domain.summary,
        "environment_introduction": domain.introduction,
        "state_space_definition": [],
        "constraints_rules": list(domain.rules),
        "operation_list": [
            {
                "operation_name": n,
                "operation_description": function_schema(getattr(cls, n))["function"]["description"],
                "operation_type": domain.operations.get(n, "query"),
            }
            for n in tool_names(cls)
        ],
        "env_class_name": cls.__name__,
        "env_class_code": code,
        "tools": [function_schema(getattr(cls, n)) for n in tool_names(cls)],
    }


def text_values(domain: Domain, spec: TaskSpec) -> list[tuple[str, Any]]:
    """(argument, value) pairs the correct procedure passes whose values come from the task text
    (its params), in call order and without repeats; ids read from results are left out."""
    state = copy.deepcopy(spec.init_config)
    env = domain.env_class(copy.deepcopy(state))
    for k, v in state.items():  # as EnvScaler applies init_config
        setattr(env, k, v)
    given = list(spec.params.values())
    pairs: list[tuple[str, Any]] = []
    solver = domain.solve(spec.params, None)
    try:
        name, args = next(solver)
        while True:
            pairs += [(k, v) for k, v in args.items() if v in given and (k, v) not in pairs]
            name, args = solver.send(getattr(env, name)(**args))
    except StopIteration:
        return pairs


def values_line(pairs: list[tuple[str, Any]]) -> str:
    """``Values: "owner": "Gus Ortiz", "amount": 120.``: each pair exactly as a JSON call writes it.

    >>> values_line([("owner", "Gus Ortiz"), ("amount", 120)])
    'Values: "owner": "Gus Ortiz", "amount": 120.'
    """
    return "Values: " + ", ".join(json.dumps({k: v}, ensure_ascii=False)[1:-1] for k, v in pairs) + "."


def scenario(domain: Domain, seed: int, split: str, i: int, vocab) -> dict[str, Any]:
    rng = random.Random(f"micro:{seed}:{split}:{i}")
    spec = domain.make_task(rng, vocab)
    text = f"{spec.text}\n{values_line(text_values(domain, spec))}"
    return {
        "env_id": domain.env_id,
        "env_class_name": domain.env_class.__name__,
        "task_id": f"{domain.env_id}-{split}-task_{i}",
        "init_config": spec.init_config,
        "task": text,
        "checklist": [c["check_item"] for c in spec.checklist],
        "checklist_with_func": spec.checklist,
        "split": split,
        "micro": {"domain": domain.name, "template": spec.template, "params": spec.params},
    }


def all_vocab() -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for d in DOMAINS.values():
        for kind, words in d.vocab.items():
            if kind in out and out[kind] != words:
                raise ValueError(f"vocabulary {kind!r} defined twice differently")
            out[kind] = words
    return out


def generate_world(seed: int, n_train: int, n_eval: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(env records, scenario records) of the world, in memory."""
    if n_train < 0 or n_eval < 0:
        raise ValueError("n_train and n_eval must be >= 0")
    vocabs = split_vocab(seed, all_vocab())
    domains = list(DOMAINS.values())
    scenarios = [
        scenario(domains[i % len(domains)], seed, split, i, vocabs[split])
        for split, n in zip(SPLITS, (n_train, n_eval), strict=True)
        for i in range(n)
    ]
    return [env_record(d) for d in domains], scenarios


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def build_world(seed: int, n_train: int, n_eval: int, out_dir: str | os.PathLike) -> WorldFiles:
    """Write envs.jsonl, scenarios.jsonl and manifest.json into ``out_dir`` (created if needed)."""
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    envs, scenarios = generate_world(seed, n_train, n_eval)
    files = WorldFiles(root, root / "envs.jsonl", root / "scenarios.jsonl", root / "manifest.json")
    _write_jsonl(files.envs, envs)
    _write_jsonl(files.scenarios, scenarios)
    manifest = {
        "world_version": WORLD_VERSION,
        "fingerprint": fingerprint(),
        "seed": seed,
        "n_train": n_train,
        "n_eval": n_eval,
        "domains": list(DOMAINS),
    }
    files.manifest.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return files


@lru_cache(maxsize=1)
def fingerprint() -> str:
    """Hash of the code that generates the world: a changed generator never reuses a stale cache."""
    h = hashlib.sha256()
    here = Path(__file__).parent
    for p in sorted([here / "world.py", *(here / "domains").glob("*.py")]):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:12]


def cache_root() -> Path:
    """``$LOPD_CACHE_DIR``, else ``~/.cache/lopd``."""
    env = os.environ.get(CACHE_ENV_VAR)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "lopd"


def cached_world(
    seed: int = 0,
    n_train: int = DEFAULT_N_TRAIN,
    n_eval: int = DEFAULT_N_EVAL,
    cache_dir: str | os.PathLike | None = None,
) -> WorldFiles:
    """The world's files under the cache, built on first use (atomically: safe with parallel callers)."""
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    target = root / "micro" / f"v{WORLD_VERSION}-{fingerprint()}-seed{seed}-train{n_train}-eval{n_eval}"
    files = WorldFiles(target, target / "envs.jsonl", target / "scenarios.jsonl", target / "manifest.json")
    if files.manifest.exists():
        return files
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    try:
        build_world(seed, n_train, n_eval, tmp)
        try:
            os.replace(tmp, target)
        except OSError:  # another process finished first; its copy is identical
            if not files.manifest.exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return files
