"""BFCL-v3 data: the 17 scored categories, loaded lazily from ``require_data("bfcl_v3")`` and cached.

>>> from envs.bfcl.data import CATEGORIES, load_entries       # doctest: +SKIP
>>> entries = load_entries("simple")                          # doctest: +SKIP
>>> entries[0].id, entries[0].answer[0].keys()                # doctest: +SKIP
('simple_0', dict_keys(['calculate_triangle_area']))

Files are JSON Lines despite ``.json``. Multi-turn entries carry no function docs; they are attached
from ``multi_turn_func_doc/`` by ``involved_classes`` (as BFCL's generation script does), and the
docs named in ``missed_function`` are withheld until their turn.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from envs.data import read_jsonl, require_data

DATA_NAME = "bfcl_v3"
PREFIX = "BFCL_v3"

NON_LIVE = ["simple", "java", "javascript", "multiple", "parallel", "parallel_multiple", "irrelevance"]
LIVE = ["live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance",
        "live_relevance"]
MULTI_TURN = ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"]
CATEGORIES = NON_LIVE + LIVE + MULTI_TURN
"""All 17 categories of the v3 leaderboard (4,441 entries)."""
RELEVANCE = ["irrelevance", "live_irrelevance", "live_relevance"]
SINGLE_TURN = NON_LIVE + LIVE

CLASS_DOC_FILES = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}


def language_of(category: str) -> str:
    """The checker language of a category: 'Java', 'JavaScript' or 'Python' (BFCL's substring rule)."""
    if "javascript" in category:
        return "JavaScript"
    if "java" in category:
        return "Java"
    return "Python"


def is_multi_turn(category: str) -> bool:
    return "multi_turn" in category


def is_relevance(category: str) -> bool:
    return "relevance" in category  # also matches "irrelevance"


@dataclass(frozen=True)
class Entry:
    """One BFCL entry with its ground truth (``answer`` is None for the relevance categories)."""

    id: str
    category: str
    question: list[list[dict[str, Any]]]
    """Per turn, the messages added at that turn (a missed-function turn is an empty list)."""
    functions: list[dict[str, Any]]
    """Function docs shown at the start (multi-turn: withheld docs removed)."""
    answer: Any = None
    """Single-turn: a list of {func: {param: [allowed values]}}; multi-turn: per turn, call strings."""
    initial_config: dict[str, Any] = field(default_factory=dict)
    involved_classes: list[str] = field(default_factory=list)
    missed_function: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Multi-turn miss_func: turn index (as a string) -> the docs added back at that turn."""

    @property
    def language(self) -> str:
        return language_of(self.category)




def data_root() -> Path:
    return require_data(DATA_NAME)


@lru_cache(maxsize=None)
def class_docs(class_name: str) -> tuple[dict[str, Any], ...]:
    """Function docs of one simulated API class, from multi_turn_func_doc/."""
    return tuple(read_jsonl(data_root() / "multi_turn_func_doc" / CLASS_DOC_FILES[class_name]))


def _multi_turn_entry(raw: dict[str, Any], category: str, answer: Any) -> Entry:
    docs = [dict(d) for c in raw["involved_classes"] for d in class_docs(c)]
    missed: dict[str, list[dict[str, Any]]] = {}
    for turn, names in (raw.get("missed_function") or {}).items():
        missed[turn] = []
        for name in names:  # first doc of that name moves to the turn, as BFCL's preprocessing does
            for i, d in enumerate(docs):
                if d["name"] == name:
                    missed[turn].append(docs.pop(i))
                    break
    return Entry(raw["id"], category, raw["question"], docs, answer, raw.get("initial_config") or {},
                 list(raw["involved_classes"]), missed)


_lock = threading.Lock()
_cache: dict[str, tuple[Entry, ...]] = {}


def load_entries(category: str) -> tuple[Entry, ...]:
    """All entries of one category, in file order (cached after the first call)."""
    if category not in CATEGORIES:
        raise KeyError(f"unknown BFCL-v3 category {category!r}; expected one of {CATEGORIES}")
    with _lock:
        if category in _cache:
            return _cache[category]
        root = data_root()
        raws = read_jsonl(root / f"{PREFIX}_{category}.json")
        answers: dict[str, Any] = {}
        answer_file = root / "possible_answer" / f"{PREFIX}_{category}.json"
        if answer_file.exists():
            answers = {a["id"]: a["ground_truth"] for a in read_jsonl(answer_file)}
        entries = []
        for raw in raws:
            answer = answers.get(raw["id"])
            if is_multi_turn(category):
                entries.append(_multi_turn_entry(raw, category, answer))
            else:
                entries.append(Entry(raw["id"], category, raw["question"], raw["function"], answer))
        _cache[category] = tuple(entries)
        return _cache[category]


def entries_by_id(category: str) -> dict[str, Entry]:
    return {e.id: e for e in load_entries(category)}


def category_of_id(entry_id: str) -> str:
    """'live_simple_3-2-1' -> 'live_simple' (BFCL ids are <category>_<index>)."""
    return entry_id.rsplit("_", 1)[0]
