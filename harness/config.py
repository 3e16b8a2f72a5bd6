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

Unknown keys and values of the wrong type are errors that name the key, never silently ignored. A field's
allowed range is part of its type, checked on load and by :func:`check_fields` (for configs built directly)::

    batch_size: PosInt = 8                              # Annotated[int, ">= 1"]
    top_p: Annotated[float, "> 0", "<= 1"] = 0.95       # every rule must hold
    preset: Annotated[str, OneOf(PRESETS)] = "1m"       # a registry's names
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import re
import types
import typing
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import yaml

T = TypeVar("T")


class ConfigError(ValueError):
    """A config file, override or flag that does not fit the config's dataclass (a user's mistake: the CLI
    prints it without a traceback)."""


class PathError(ValueError):
    """A file or folder given by the user that cannot serve as asked (a directory where a file is wanted, a
    file where a directory is, binary or oversized input); the CLI prints it without a traceback."""


MAX_CONFIG_BYTES = 1 << 20
"""A config file larger than this is refused unread (YAML configs are a few KB; this catches a wrong file)."""

PosInt = Annotated[int, ">= 1"]
NonNegInt = Annotated[int, ">= 0"]
PosFloat = Annotated[float, "> 0"]
NonNegFloat = Annotated[float, ">= 0"]
Fraction = Annotated[float, ">= 0", "<= 1"]
Probability = Annotated[float, "> 0", "<= 1"]
"""Nucleus mass and the like: 0 would keep nothing."""


@dataclasses.dataclass(frozen=True)
class OneOf:
    """A rule: the value is one of ``names`` (a registry's keys, read when checked: later additions count)."""

    names: Collection[str] | Callable[[], Collection[str]]

    def problem(self, value: Any) -> str | None:
        names = self.names() if callable(self.names) else self.names
        return None if value in names else f"is not one of {', '.join(map(str, names))}"


@dataclasses.dataclass(frozen=True)
class Match:
    """A rule: the string fully matches ``pattern``; ``allowed`` says so in words for the message."""

    pattern: str
    allowed: str

    def problem(self, value: Any) -> str | None:
        return None if re.fullmatch(self.pattern, str(value)) else f"is not {self.allowed}"


Device = Annotated[str, Match(r"cpu|auto|mps|cuda(:\d+)?", "cpu, cuda, cuda:N, mps or auto")]
"""A torch device name (a typo is refused on load, not when torch meets it after the env is built)."""


_BOUND = re.compile(r"(>=|<=|>|<)\s*(\S+)")


def _rule_problem(value: Any, rule: Any) -> str | None:
    """Why ``value`` breaks ``rule`` (a bound such as ``">= 1"``, or an object with ``problem``), or None."""
    if isinstance(rule, str):
        m = _BOUND.fullmatch(rule.strip())
        if not m:
            raise TypeError(f"config rule {rule!r} is not '>= N', '> N', '<= N' or '< N'")  # a config class's bug
        op, bound = m.group(1), float(m.group(2))
        ok = {">=": value >= bound, ">": value > bound, "<=": value <= bound, "<": value < bound}[op]
        return None if ok else "out of range"
    problem = getattr(rule, "problem", None)
    return problem(value) if problem else None  # metadata of other tools is not a rule of ours


def _check_rules(value: Any, rules: Sequence[Any], key: str) -> None:
    problems = [p for p in (_rule_problem(value, r) for r in rules) if p]
    if not problems:
        return
    bounds = [r.strip() for r in rules if isinstance(r, str)]
    if "out of range" in problems:
        raise ConfigError(f"{key}: {value!r} is out of range (allowed: {' and '.join(bounds)})")
    raise ConfigError(f"{key}: {value!r} {problems[0]}")


def _coerce(value: Any, tp: Any, key: str) -> Any:
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return value
    if origin is Annotated:
        out = _coerce(value, args[0], key)
        _check_rules(out, tp.__metadata__, key)
        return out
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        if len([a for a in args if a is not type(None)]) == 1:  # X | None: X's own message (its range)
            return _coerce(value, next(a for a in args if a is not type(None)), key)
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


def _resolve(owner: Any) -> Any:
    if isinstance(owner, str):
        import importlib

        module, _, attr = owner.partition(":")
        return getattr(importlib.import_module(module), attr)
    return owner


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def _check_tree(value: Any, tp: Any, key: str) -> None:
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        _check_tree(value, args[0], key)
        _check_rules(value, tp.__metadata__, key)
    elif origin in (Union, types.UnionType) and value is not None:
        for a in (a for a in args if a is not type(None)):
            base = get_args(a)[0] if get_origin(a) is Annotated else None
            base = (int, float) if base is float else base  # an int where a float is wanted is one
            if isinstance(base, (type, tuple)) and isinstance(value, base) or get_origin(a) is Literal:
                _check_tree(value, a, key)
    elif origin is Literal and value not in args:
        raise ConfigError(f"{key}: {value!r} is not one of {list(args)}")


def check_fields(obj: Any) -> None:
    """Check a dataclass's fields against the rules of their types (``Annotated`` ranges, ``Literal``
    choices), as loading does: for configs built directly, e.g. from flags. Use as ``__post_init__``."""
    for f in dataclasses.fields(obj):
        _check_tree(getattr(obj, f.name), _hints(type(obj))[f.name], f.name)


def arg_type(owner: Any, name: str | None = None) -> Callable[[str], Any]:
    """An argparse ``type=`` that reads a flag as loading reads field ``name`` of config class ``owner`` (or
    as the type ``owner``, e.g. ``PosInt``), so the flag and the config key share one rule. ``owner`` may be
    ``"module:Class"``, imported only when the flag is given (``lopd --help`` stays light)::

        p.add_argument("--batch-size", type=arg_type("harness.evaluation.evaluate:EvalRunConfig", "batch_size"))
        p.add_argument("--workers", type=arg_type(PosInt))
    """
    def parse(text: str) -> Any:
        tp = _hints(_resolve(owner))[name] if name else owner
        try:
            value = yaml.safe_load(text) if text.strip() else text
        except yaml.YAMLError:
            value = text
        try:
            return _coerce(value, tp, "")
        except ConfigError as e:
            raise argparse.ArgumentTypeError(str(e).removeprefix(": ")) from None
    return parse


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


def flat_keys(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested mapping by dotted key (an empty mapping stays one value).

    >>> flat_keys({"optim": {"lr": 0.1}, "env": {}, "seed": 1})
    {'optim.lr': 0.1, 'env': {}, 'seed': 1}
    """
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(flat_keys(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def recorded_settings_agree(recorded: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether settings recorded with a finished run still describe the run ``now`` would train: they agree
    on every key the record holds. A changed value (an edited file, a new default) disagrees; a setting
    added to the code since, absent from the record, does not."""
    new = flat_keys(now)
    return all(k in new and new[k] == v for k, v in flat_keys(recorded).items())


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


def load_config(cls: type[T], path: str | os.PathLike | None = None, overrides: list[str] | None = None,
                base: dict[str, Any] | None = None) -> T:
    """Defaults of ``cls`` <- ``base`` (a mapping, e.g. a model folder's defaults) <- YAML file at ``path``
    <- ``key=value`` overrides, then type-checked."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(read_text_file(path, "config file", MAX_CONFIG_BYTES))
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: invalid YAML: {e}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the top level must be a mapping")
        data = loaded or {}
    data = _merged(base or {}, data)
    for item in overrides or []:
        keys, value = parse_override(item)
        node = data
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {k} is not a section")
        node[keys[-1]] = value
    return from_dict(cls, data)


def read_text_file(path: str | os.PathLike, what: str, max_bytes: int) -> str:
    """The UTF-8 text of a user's file, or a :class:`PathError` naming it: missing, a directory, larger than
    ``max_bytes`` (refused unread) or binary."""
    p = Path(path)
    if p.is_dir():
        raise PathError(f"{path} is a directory; a {what} is wanted")
    if not p.is_file():
        raise PathError(f"{path}: no such {what}")
    if p.stat().st_size > max_bytes:
        size = p.stat().st_size / 2**20
        raise PathError(f"{path} is {size:.1f} MiB; a {what} is at most {max_bytes / 2**20:g} MiB")
    raw = p.read_bytes()
    bad = raw.find(b"\0")  # NUL is valid UTF-8 but never in a text file
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        bad = e.start if bad < 0 else min(bad, e.start)
    if bad >= 0:
        raise PathError(f"{path} is not a UTF-8 text {what} (binary data at byte {bad})")
    return text


def check_input_files(paths: Sequence[str | os.PathLike], key: str) -> None:
    """Refuse, before any work, input files that are missing or are folders (naming the first)."""
    for path in paths:
        if Path(path).is_dir():
            raise PathError(f"{key}: {path} is a directory; a file is wanted")
        if not Path(path).is_file():
            raise PathError(f"{key}: {path}: no such file")


def check_output(path: str | os.PathLike, key: str, *, folder: bool) -> None:
    """Refuse, before any work, an output path of the wrong kind: an existing file where a folder is
    written (``folder``), or an existing folder where a file is; also a parent that is a file."""
    p = Path(path)
    if folder and p.exists() and not p.is_dir():
        raise PathError(f"{key}: {path} is an existing file; it must be a folder (new or existing)")
    if not folder and p.is_dir():
        raise PathError(f"{key}: {path} is an existing folder; it must be a file path")
    parent = next((q for q in p.absolute().parents if q.exists()), None)
    if parent is not None and not parent.is_dir():
        raise PathError(f"{key}: {parent} is a file, so {path} cannot be made")


def _merged(low: dict[str, Any], high: dict[str, Any]) -> dict[str, Any]:
    """``high`` over ``low``, mapping by mapping (a copy; neither is changed)."""
    out = {k: _merged(v, {}) if isinstance(v, dict) else v for k, v in low.items()}
    for k, v in high.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


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
