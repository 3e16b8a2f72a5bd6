"""Our own implementations of ACEBench's agent scenario classes.

ACEBench's official classes are not installable (GitHub-only), so these are written from the
function docs in the data and checked against every stored final state (see
``tests/envs/acebench/test_agent_replay.py``). Public methods are the tools a model may call;
``SAVED_ATTRIBUTES`` names the attributes ACEBench saves and compares at the end.

>>> api = make_instance("MessageApi", "en")
>>> api._load_scenario({"wifi": True, "logged_in": True})
>>> api.send_message(sender_name="Eve", receiver_name="Frank", message="hi")["status"]
False
>>> len(api.inbox)  # six preset messages fill the inbox
6
"""

from __future__ import annotations

from typing import Any

from envs.acebench.scenarios.base import BaseApi
from envs.acebench.scenarios.food import FoodPlatform
from envs.acebench.scenarios.message import MessageApi
from envs.acebench.scenarios.reminder import ReminderApi
from envs.acebench.scenarios.travel import Travel

CLASSES: dict[str, type] = {
    "BaseApi": BaseApi,
    "MessageApi": MessageApi,
    "ReminderApi": ReminderApi,
    "FoodPlatform": FoodPlatform,
    "Travel": Travel,
}
SAVED_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "BaseApi": ("wifi", "logged_in"),
    "MessageApi": ("inbox",),
    "ReminderApi": ("reminder_list",),
    "FoodPlatform": ("users", "logged_in_users", "orders"),
    "Travel": ("users", "reservations"),
}


def make_instance(class_name: str, language: str) -> Any:
    """A fresh instance of a scenario class in one language ('en' or 'zh')."""
    if class_name not in CLASSES:
        raise KeyError(f"unknown ACEBench scenario class {class_name!r}; known: {', '.join(CLASSES)}")
    return CLASSES[class_name](language)


def public_methods(instance: Any) -> list[str]:
    """The callable tool names of an instance: its public methods, sorted like inspect.getmembers."""
    return sorted(n for n in dir(instance) if not n.startswith("_") and callable(getattr(instance, n)))


__all__ = [
    "BaseApi",
    "CLASSES",
    "FoodPlatform",
    "MessageApi",
    "ReminderApi",
    "SAVED_ATTRIBUTES",
    "Travel",
    "make_instance",
    "public_methods",
]
