"""What a micro-world domain is made of, and the small helpers every domain uses.

A domain supplies an environment class (plain Python whose source becomes ``env_class_code``), a
task generator (template + entities drawn from the split's vocabularies -> init_config, task text
and a checklist of ``check_func`` sources), and a scripted solver written as a generator::

    def solve(p, mistake=None):
        r = yield "find_customer", {"customer": p["customer"]}   # r: the tool's result, parsed
        cid = r["data"][0]["customer_id"]                     # data dependency: id read from a result
        ...

``mistake`` names a wrong procedure (skip a step, pick the wrong entity, use a distractor tool,
stop early); None is the correct procedure, which always scores 1.0 and every mistake scores less.

:mod:`envs.micro.domains.tasks` holds the helpers the task generators share.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

Call = tuple[str, dict[str, Any]]
Solver = Callable[[dict[str, Any], "str | None"], Generator[Call, Any, None]]

FIRST_NAMES = (
    "Ada",
    "Bo",
    "Cleo",
    "Dev",
    "Eli",
    "Fay",
    "Gus",
    "Hana",
    "Ivo",
    "Jun",
    "Kai",
    "Lena",
    "Milo",
    "Nia",
    "Omar",
    "Pia",
    "Quin",
    "Rosa",
    "Sami",
    "Tess",
    "Uma",
    "Vik",
    "Wren",
    "Xia",
    "Yuri",
    "Zoe",
    "Arlo",
    "Bea",
    "Cyd",
    "Dora",
)
LAST_NAMES = (
    "Park",
    "Chen",
    "Okafor",
    "Silva",
    "Novak",
    "Haas",
    "Ibsen",
    "Jansen",
    "Kowal",
    "Lind",
    "Mori",
    "Nunez",
    "Ortiz",
    "Patel",
    "Quist",
    "Rossi",
    "Sato",
    "Tran",
    "Ueda",
    "Varga",
    "Weber",
    "Yilmaz",
    "Zhou",
    "Abbas",
    "Brandt",
    "Costa",
    "Dahl",
    "Eze",
    "Falk",
    "Garza",
)
EVAL_FRACTION = 1 / 3
"""Share of every vocabulary that only the eval split may use."""


@dataclass(frozen=True)
class TaskSpec:
    """One generated task, before it becomes a scenario record."""

    template: str
    text: str
    init_config: dict[str, Any]
    checklist: list[dict[str, str]]
    params: dict[str, Any]
    """What the solver may know: the values named in the task text (never ids)."""


@dataclass(frozen=True)
class Domain:
    """A domain of the micro world."""

    name: str
    env_class: type
    introduction: str
    rules: tuple[str, ...]
    vocab: Mapping[str, tuple[str, ...]]
    """Domain entity vocabularies, split per seed into disjoint train and eval parts."""
    make_task: Callable[[random.Random, Vocab], TaskSpec]
    solve: Solver
    mistakes: Mapping[str, tuple[str, ...]]
    """Template -> the wrong procedures the noisy expert may follow on it."""
    distractors: tuple[str, ...]
    """Tools no correct procedure uses."""
    expert_success: float = 0.3
    """Default probability that the noisy expert follows the correct procedure."""
    summary: str = ""
    operations: dict[str, str] = field(default_factory=dict)
    """Tool name -> 'query' or 'state_change' (EnvScaler's operation_list)."""

    @property
    def env_id(self) -> str:
        return f"micro_{self.name}"


class Vocab:
    """The entity names one split may use (all domains' vocabularies plus person names)."""

    def __init__(self, lists: Mapping[str, tuple[str, ...]]):
        self.lists = dict(lists)

    def sample(self, kind: str, rng: random.Random, k: int) -> list[str]:
        pool = self.lists[kind]
        if k > len(pool):
            raise ValueError(f"vocabulary {kind!r} has {len(pool)} entries, {k} needed")
        return rng.sample(pool, k)

    def people(self, rng: random.Random, k: int) -> list[str]:
        """k distinct full names; no first or last name repeats within one task."""
        return [
            f"{f} {s}" for f, s in zip(self.sample("first", rng, k), self.sample("last", rng, k), strict=True)
        ]


def split_vocab(seed: int, domain_vocab: Mapping[str, tuple[str, ...]]) -> dict[str, Vocab]:
    """Shuffle every vocabulary with the seed and cut it into disjoint train and eval parts."""
    rng = random.Random(f"micro-vocab:{seed}")
    train: dict[str, tuple[str, ...]] = {}
    evals: dict[str, tuple[str, ...]] = {}
    for kind, words in {"first": FIRST_NAMES, "last": LAST_NAMES, **domain_vocab}.items():
        words = sorted(set(words))
        rng.shuffle(words)
        cut = max(1, round(len(words) * EVAL_FRACTION))
        evals[kind], train[kind] = tuple(words[:cut]), tuple(words[cut:])
    return {"train": Vocab(train), "eval": Vocab(evals)}


def first_data(result: Any) -> dict[str, Any]:
    """The first entry of a successful list result (solvers read ids this way)."""
    return result["data"][0]


def tool_names(cls: type) -> list[str]:
    """Public methods of an env class, in definition order: its tools."""
    return [n for n, v in vars(cls).items() if inspect.isfunction(v) and not n.startswith("_")]


def operation_types(env_class: type, *state_changes: str) -> dict[str, str]:
    """EnvScaler's operation type of every tool of ``env_class``: 'state_change' for the tools named,
    'query' for the others."""
    tools = tool_names(env_class)
    unknown = sorted(set(state_changes) - set(tools))
    if unknown:
        raise ValueError(f"{env_class.__name__} has no tools {unknown}")
    return {n: "state_change" if n in state_changes else "query" for n in tools}
