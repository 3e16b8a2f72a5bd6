"""Typed dataclass configs from YAML files plus ``key=value`` overrides.

>>> from dataclasses import dataclass, field
>>> @dataclass
... class Optim:
...     lr: float = 1e-5
...     '''Learning rate.'''
>>> @dataclass
... class Run:
...     steps: int = 10
...     '''Training steps.'''
...     optim: Optim = field(default_factory=Optim)
>>> cfg = load_config(Run, overrides=["steps=3", "optim.lr=2e-5"])
>>> cfg.steps, cfg.optim.lr
(3, 2e-05)

Unknown keys and values of the wrong type are errors that name the key, never silently ignored.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

import yaml

T = TypeVar("T")


class ConfigError(ValueError):
    """A config file or override that does not fit the config's dataclass."""


def _coerce(value: Any, tp: Any, key: str) -> Any:
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, key)
            except ConfigError:
                pass
        raise ConfigError(f"{key}: {value!r} fits none of {tp}")
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{key}: {value!r} is not one of {list(args)}")
        return value
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping for {tp.__name__}, got {type(value).__name__}")
        return from_dict(tp, value, prefix=f"{key}.")
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        item = args[0] if args else Any
        out = [_coerce(v, item, f"{key}[{i}]") for i, v in enumerate(value)]
        return tuple(out) if origin is tuple else out
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        return dict(value)
    return _coerce_scalar(value, tp, key)


def _coerce_scalar(value: Any, tp: Any, key: str) -> Any:
    """``value`` as a bool, int, float, str or Path (YAML's own types; a number as a string is
    accepted where a float is wanted, since YAML reads ``1e-4`` as a string)."""
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected true/false, got {value!r}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    if tp is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    if tp is Path:
        return Path(value)
    return value


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _sections_field(cls: type) -> str | None:
    """The field holding a dataclass's open sections (``metadata={"sections": True}``), if any."""
    return next((f.name for f in dataclasses.fields(cls) if f.metadata.get("sections")), None)


def from_dict(cls: type[T], data: dict[str, Any], prefix: str = "") -> T:
    """Build dataclass ``cls`` from a mapping, checking keys and types.

    A class with a sections field also takes top-level mappings that its ``section_type(key, data)``
    types (e.g. one per registered learner); they are stored in that field by key.
    """
    hints = _hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    holder = _sections_field(cls)
    sections: dict[str, Any] = {}
    for k in sorted(set(data) - names) if holder else ():
        tp = cls.section_type(k, data)  # type: ignore[attr-defined]
        if tp is not None:
            sections[k] = _coerce(data[k], tp, prefix + k)
    unknown = set(data) - names - set(sections)
    if unknown:
        raise ConfigError(f"unknown config key(s): {', '.join(prefix + k for k in sorted(unknown))}; "
                          f"known: {', '.join(sorted(names - {holder} if holder else names))}")
    kwargs = {k: _coerce(v, hints[k], prefix + k) for k, v in data.items() if k in names}
    if sections:
        kwargs[holder] = sections
    return cls(**kwargs)


def to_dict(cfg: Any) -> dict[str, Any]:
    """A plain, YAML-safe mapping of a config."""
    def plain(v: Any) -> Any:
        if dataclasses.is_dataclass(v):
            out = {}
            for f in dataclasses.fields(v):
                value = plain(getattr(v, f.name))
                if f.metadata.get("sections"):
                    out.update(value)  # open sections stand at the top level, where they are read
                else:
                    out[f.name] = value
            return out
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, Path):
            return str(v)
        return v
    return plain(cfg)


def parse_override(item: str) -> tuple[list[str], Any]:
    """``a.b=value`` -> (["a", "b"], value parsed as YAML, so 3 is int and [1,2] a list)."""
    if "=" not in item:
        raise ConfigError(f"override {item!r} is not key=value")
    key, raw = item.split("=", 1)
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override {item!r} has an empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.split("."), value


def config_and_overrides(config: str | None, overrides: Sequence[str] = ()) -> tuple[str | None, list[str]]:
    """Split a command line's optional ``CONFIG`` positional from its ``key=value`` overrides.

    argparse gives the first word to an optional ``config`` positional even when it is an override
    (``lopd train optim.lr=1e-4``); a word holding ``=`` that names no file is taken as an override.

    >>> config_and_overrides("optim.lr=1e-4", ["steps=3"])
    (None, ['optim.lr=1e-4', 'steps=3'])
    >>> config_and_overrides("harness/configs/grpo.yaml", ["steps=3"])
    ('harness/configs/grpo.yaml', ['steps=3'])
    """
    overrides = list(overrides)
    if config and "=" in config and not Path(config).exists():
        return None, [config] + overrides
    return config, overrides


def load_config(cls: type[T], path: str | os.PathLike | None = None, overrides: list[str] | None = None) -> T:
    """Defaults of ``cls`` <- YAML file at ``path`` <- ``key=value`` overrides, then type-checked."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: invalid YAML: {e}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the top level must be a mapping")
        data = loaded or {}
    for item in overrides or []:
        keys, value = parse_override(item)
        node = data
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {k} is not a section")
        node[keys[-1]] = value
    return from_dict(cls, data)


def save_config(cfg: Any, path: str | os.PathLike) -> None:
    Path(path).write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False), encoding="utf-8")


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field (``x: int = 1`` then ``'''doc'''``), for --help and docs."""
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    docs, body = {}, tree.body[0].body  # type: ignore[attr-defined]
    for a, b in zip(body, body[1:]):
        if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and isinstance(b, ast.Expr) \
                and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str):
            docs[a.target.id] = inspect.cleandoc(b.value.value)
    return docs
