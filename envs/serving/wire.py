"""The JSON form of an env's info dict on ``lopd serve``'s wire, shared by the server and its client
(neither side imports the other: the server needs OpenEnv, the client must not)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

RESERVED = ("text", "truncated", "done", "reward", "metadata")
"""Info keys that collide with the observation's own fields; they travel as ``info_<key>``."""


def jsonable_info(info: dict[str, Any]) -> dict[str, Any]:
    """``info`` as observation fields: a dataclass (a :class:`~envs.trace.Step`) as its dict, a value that
    is not JSON dropped and its key listed in ``dropped_info_keys``, a reserved key prefixed."""
    out: dict[str, Any] = {}
    dropped: list[str] = []
    for key, value in info.items():
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = dataclasses.asdict(value)
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            dropped.append(str(key))
            continue
        out[f"info_{key}" if key in RESERVED else str(key)] = value
    if dropped:
        out["dropped_info_keys"] = dropped
    return out


def info_from_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """The reverse of :func:`jsonable_info` for every key it kept (a Step stays a dict here)."""
    return {(k[5:] if k.startswith("info_") and k[5:] in RESERVED else k): v
            for k, v in fields.items() if k != "dropped_info_keys"}
