"""Lazy, cached loading of ACEBench entries (``acebench/data_all/data_<lang>/``).

Each category has a question file ``data_<category>.json`` and an answer file
``possible_answer/data_<category>.json`` (both JSON Lines despite the suffix). The two are joined
by line position, as ACEBench's evaluator does, and the ids are checked to agree.

>>> from envs.acebench.data import load_category, has_acebench
>>> if has_acebench():
...     entries = load_category("en", "special_irrelevant")
...     print(len(entries), entries[0].id)
50 special_irrelevant_0
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.data import has_data, read_jsonl, require_data

LANGUAGES = ("en", "zh")

NORMAL_CATEGORIES = (
    "normal_single_turn_single_function",
    "normal_single_turn_parallel_function",
    "normal_multi_turn_user_adjust",
    "normal_multi_turn_user_switch",
    "normal_similar_api",
    "normal_preference",
    "normal_atom_bool",
    "normal_atom_enum",
    "normal_atom_number",
    "normal_atom_list",
    "normal_atom_object_deep",
    "normal_atom_object_short",
)
SPECIAL_CATEGORIES = ("special_incomplete", "special_error_param", "special_irrelevant")
AGENT_CATEGORIES = ("agent_multi_step", "agent_multi_turn")
FAMILIES: dict[str, tuple[str, ...]] = {
    "normal": NORMAL_CATEGORIES,
    "special": SPECIAL_CATEGORIES,
    "agent": AGENT_CATEGORIES,
}
ALL_CATEGORIES = NORMAL_CATEGORIES + SPECIAL_CATEGORIES + AGENT_CATEGORIES


_FAMILY_OF = {c: fam for fam, cats in FAMILIES.items() for c in cats}


def family_of(category: str) -> str:
    """'normal', 'special' or 'agent' for a category name (with or without a ``data_`` prefix)."""
    fam = _FAMILY_OF.get(category)  # one lookup: verdicts ask for every entry
    if fam is None:
        fam = _FAMILY_OF.get(category.removeprefix("data_"))
    if fam is None:
        raise KeyError(f"unknown ACEBench category {category!r}; known: {', '.join(ALL_CATEGORIES)}")
    return fam


@dataclass(frozen=True)
class Entry:
    """One ACEBench entry: the question line joined with its answer line."""

    id: str
    category: str
    """e.g. 'normal_atom_bool' (no ``data_`` prefix)."""
    language: str
    question: str
    functions: list[dict[str, Any]]
    ground_truth: Any
    time: str = ""
    profile: str | None = None
    mile_stone: list[Any] | None = None
    initial_config: dict[str, Any] = field(default_factory=dict)
    involved_classes: list[str] = field(default_factory=list)
    family: str = field(init=False, repr=False, compare=False)
    """'normal', 'special' or 'agent' (from the category; set on creation)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "family", family_of(self.category))


def has_acebench() -> bool:
    """True when the ACEBench data folder is present under the data root."""
    return has_data("acebench", "data_all")


def language_dir(language: str) -> Path:
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    return require_data("acebench", "data_all", f"data_{language}")




@functools.lru_cache(maxsize=None)
def load_category(language: str, category: str) -> tuple[Entry, ...]:
    """All entries of one category, in file order (cached per process)."""
    family_of(category)
    root = language_dir(language)
    questions = read_jsonl(root / f"data_{category}.json")
    answers = read_jsonl(root / "possible_answer" / f"data_{category}.json")
    if len(questions) != len(answers):
        raise ValueError(f"{category} ({language}): {len(questions)} questions but {len(answers)} answers")
    out = []
    for q, a in zip(questions, answers):
        if q.get("id") != a.get("id"):
            raise ValueError(
                f"{category} ({language}): question id {q.get('id')!r} != answer id {a.get('id')!r}"
            )
        out.append(
            Entry(
                id=q["id"],
                category=category,
                language=language,
                question=q.get("question", ""),
                functions=list(q.get("function") or []),
                ground_truth=a.get("ground_truth"),
                time=q.get("time") or "",
                profile=q.get("profile"),
                mile_stone=a.get("mile_stone"),
                initial_config=dict(q.get("initial_config") or {}),
                involved_classes=list(q.get("involved_classes") or []),
            )
        )
    return tuple(out)


def load_family(language: str, family: str, categories: tuple[str, ...] | None = None) -> list[Entry]:
    """Entries of a family ('normal', 'special', 'agent'), optionally restricted to some categories."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {sorted(FAMILIES)}, got {family!r}")
    wanted = FAMILIES[family] if categories is None else tuple(c.removeprefix("data_") for c in categories)
    for c in wanted:
        if family_of(c) != family:
            raise ValueError(f"category {c!r} is not in the {family} family")
    return [e for c in wanted for e in load_category(language, c)]
