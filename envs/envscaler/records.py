"""Read EnvScaler's record files: environment metadata and scenarios, from JSON, JSONL or parquet.

The official files come in several shapes, and all of them load here:

- ``191_env_metadata.json``: a JSON object keyed by env_id (or a JSON list of env records);
- ``envscaler_rl_scenario_metadata.json``: a JSON list of scenario records;
- JSON Lines, one record per line (the staged copies under ``$LOPD_DATA_DIR/envscaler``);
- parquet (the Hugging Face release), where ``tools`` and ``init_config`` arrive as JSON strings;
- a folder: every ``*.json``, ``*.jsonl`` and ``*.parquet`` file in it, in name order.

>>> import json, tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "s.jsonl"
>>> _ = p.write_text(json.dumps({"task_id": "e-task_1", "env_id": "e", "task": "Do it.",
...     "init_config": "{}", "checklist_with_func": []}) + "\\n")
>>> [s["init_config"] for s in load_scenarios(p)]
[{}]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from envs.data import json_lines, require_data

SUFFIXES = (".json", ".jsonl", ".parquet")
ENV_FIELDS = ("env_id", "env_class_code", "tools")
SCENARIO_FIELDS = ("task_id", "env_id", "task", "init_config", "checklist_with_func")
# Fields the Hugging Face release stores as JSON strings; decoded when they are strings.
_JSON_STRING_FIELDS = (
    "tools",
    "init_config",
    "checklist_with_func",
    "checklist",
    "operation_list",
    "state_space_definition",
    "constraints_rules",
    "env_func_details",
)

STAGED_ENVS = "envscaler_rl_envs.jsonl"
STAGED_SCENARIOS = ("envscaler_rl_scenarios.jsonl", "smolqwen_fixture_scenarios.jsonl")
STAGED_FIXTURE_SCENARIOS = ("smolqwen_fixture_scenarios.jsonl",)


class RecordError(ValueError):
    """A record file that cannot be read, or a record without a required field."""


def _files(path: str | Path) -> list[Path]:
    p = Path(path).expanduser()
    if p.is_dir():
        found = sorted(f for f in p.iterdir() if f.suffix in SUFFIXES and f.is_file())
        if not found:
            raise RecordError(f"{p}: no {', '.join(SUFFIXES)} files in this folder")
        return found
    if not p.exists():
        raise RecordError(f"{p}: no such file")
    return [p]


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError as e:  # optional dependency
        raise RecordError(f"{path}: reading parquet needs pyarrow (pip install 'lopd-gym[parquet]')") from e
    try:
        return pq.read_table(path).to_pylist()
    except Exception as e:
        raise RecordError(f"{path}: not a readable parquet file ({type(e).__name__}: {e})") from None


def _read_json(path: Path) -> list[dict[str, Any]]:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise RecordError(f"{path}: not valid JSON ({e})") from None
    if isinstance(obj, list):
        return obj
    if isinstance(obj, dict):
        if "env_class_code" in obj or "task_id" in obj:  # a single record
            return [obj]
        # keyed by id, as 191_env_metadata.json is: {env_id: record}
        out = []
        for key, rec in obj.items():
            if not isinstance(rec, dict):
                raise RecordError(f"{path}: value of key {key!r} is a {type(rec).__name__}, not a record")
            out.append(rec if "env_id" in rec else {"env_id": key, **rec})
        return out
    raise RecordError(f"{path}: top-level JSON must be a list or an object, got {type(obj).__name__}")


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    for lineno, value, error in json_lines(path):
        if error is not None:
            raise RecordError(f"{path}:{lineno}: not valid JSON ({error})") from None
        yield value


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Every record in a JSON, JSONL or parquet file (or a folder of them), JSON strings decoded."""
    out: list[dict[str, Any]] = []
    for f in _files(path):
        if f.suffix == ".parquet":
            raw: Iterable[Any] = _read_parquet(f)
        elif f.suffix == ".jsonl":
            raw = _read_jsonl(f)
        else:
            raw = _read_json(f)
        for i, rec in enumerate(raw):
            if not isinstance(rec, dict):
                raise RecordError(f"{f}: record {i} is a {type(rec).__name__}, not an object")
            out.append(_decode_strings(rec, f"{f}: record {i}"))
    return out


def _decode_strings(rec: dict[str, Any], where: str) -> dict[str, Any]:
    rec = dict(rec)
    for key in _JSON_STRING_FIELDS:
        v = rec.get(key)
        if isinstance(v, str) and v.strip()[:1] in ("{", "["):
            try:
                rec[key] = json.loads(v)
            except (json.JSONDecodeError, RecursionError) as e:
                raise RecordError(f"{where}: field {key!r} is a string but not valid JSON ({e})") from None
    return rec


def _checked(paths: str | Path | Iterable[str | Path], fields: tuple[str, ...], kind: str,
             key: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, record)`` of every record of ``paths`` that has ``fields``; ``where`` names the file and
    the record (``kind`` and its ``key`` field) for the error messages."""
    for path in [paths] if isinstance(paths, (str, Path)) else list(paths):
        for rec in read_records(path):
            where = f"{path}: {kind} {rec.get(key, '?')!r}"
            missing = [k for k in fields if k not in rec]
            if missing:
                raise RecordError(f"{where}: missing field(s) {', '.join(missing)}")
            yield where, rec


def load_envs(paths: str | Path | Iterable[str | Path] | None = None) -> dict[str, dict[str, Any]]:
    """Environment records keyed by env_id. Default: the staged ``envscaler_rl_envs.jsonl``."""
    if paths is None:
        paths = require_data("envscaler", STAGED_ENVS)
    envs: dict[str, dict[str, Any]] = {}
    for where, rec in _checked(paths, ENV_FIELDS, "env", "env_id"):
        if not isinstance(rec["env_class_code"], str):
            raise RecordError(f"{where}: env_class_code must be Python source text")
        if not isinstance(rec["tools"], list) or not all(isinstance(t, dict) for t in rec["tools"]):
            raise RecordError(f"{where}: tools must be a list of OpenAI function schemas")
        envs[str(rec["env_id"])] = rec
    return envs


def load_scenarios(paths: str | Path | Iterable[str | Path] | None = None) -> list[dict[str, Any]]:
    """Scenario records, in file order. Default: every staged scenario file.

    A task_id seen twice must carry the same record both times (then it is kept once)."""
    if paths is None:
        paths = [require_data("envscaler", name) for name in STAGED_SCENARIOS]
    out: dict[str, dict[str, Any]] = {}
    for where, rec in _checked(paths, SCENARIO_FIELDS, "scenario", "task_id"):
        if not isinstance(rec["init_config"], dict):
            raise RecordError(f"{where}: init_config must be an object of attributes")
        checks = rec["checklist_with_func"]
        if not isinstance(checks, list) or not all(
            isinstance(c, dict) and "check_func" in c for c in checks
        ):
            raise RecordError(
                f"{where}: checklist_with_func must be a list of {{check_item, check_func}}"
            )
        tid = str(rec["task_id"])
        if tid in out and out[tid] != rec:
            raise RecordError(f"{where}: task_id appears twice with different contents")
        out[tid] = rec
    return list(out.values())
