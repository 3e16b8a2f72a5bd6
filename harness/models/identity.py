"""What a model path stands for when a cache or a resumed run compares two of them.

A built base's folder holds ``base_info.json`` with the key it was built under. The folder's own name holds
the key of the code that looked it up (a pinned base copied into the cache is named by today's code), so
two folders of the same weights can have different names; their recorded key is the same.
"""

from __future__ import annotations

import json
from pathlib import Path


def recorded_base_key(path: str | Path) -> str | None:
    """The key a built base recorded in its ``base_info.json``; None for anything else (a Hub model, a
    checkpoint, a missing or unreadable folder).

    >>> recorded_base_key("/no/such/folder") is None
    True
    """
    info = Path(path).expanduser() / "base_info.json"
    try:
        key = json.loads(info.read_text()).get("key") if info.is_file() else None
    except (OSError, ValueError, AttributeError):
        return None
    return key if isinstance(key, str) and key else None


def same_model(a: str | Path, b: str | Path) -> bool:
    """Whether two model paths name the same weights: equal paths, or built bases of one recorded key."""
    if str(a) == str(b):
        return True
    key = recorded_base_key(a)
    return key is not None and key == recorded_base_key(b)
