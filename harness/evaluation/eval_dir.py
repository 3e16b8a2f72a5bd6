"""An evaluation's output folder, read back and repaired: what a resumed run skips, and its verdicts.

``traces.jsonl`` is the truth; ``verdicts.jsonl`` is derived from it (:func:`verdict_of`) and rebuilt where
it lacks a line; a torn last line (a kill mid-write) is cut off or terminated; ``run.json`` holds the
settings a resume must keep; ``summary.json`` is written through a temporary file, strict JSON::

    progress = read_progress("runs/eval-a")     # .traces / .verdicts by (env, task, sample), .notes
    check_run_file(out, settings, has_episodes=bool(progress.traces))
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envs.data import json_lines
from envs.trace import Episode, TraceError, iter_records

TRACES, VERDICTS, SUMMARY, RUN = "traces.jsonl", "verdicts.jsonl", "summary.json", "run.json"
PASS_THRESHOLD = 1.0
# Settings that change what a sample means: a resumed run must keep them.
_RESUME_KEYS = ("model", "temperature", "top_p", "top_k", "max_new_tokens", "seed", "max_turns",
                "max_context_tokens", "env_kwargs", "template_kwargs")


def jsonable(x: Any) -> Any:
    return json.loads(json.dumps(x, default=repr))


def verdict_of(episode: Episode | dict[str, Any]) -> dict[str, Any]:
    """The verdict line of one eval episode (an Episode or its raw trace dict).

    ``pass`` is ``reward >= 1.0`` (BFCL/ACEBench/EvalPlus: the official verdict; EnvScaler: every
    check holds). ``details`` are the env's verdict details from its final ``info``.
    """
    d = json.loads(episode.to_json()) if isinstance(episode, Episode) else episode
    meta = d.get("meta") or {}
    reward = float(d.get("reward", 0.0))
    return {"env": d["env_id"], "task_id": d["task_id"], "task_index": meta.get("task_index"),
            "sample": meta.get("sample"), "category": meta.get("category"), "reward": reward,
            "pass": reward >= PASS_THRESHOLD, "steps": len(d.get("steps") or []),
            "terminated": bool(d.get("terminated")), "truncated": bool(d.get("truncated")),
            "stop": meta.get("stop"), "details": meta.get("verdict") or {}}


def _key_of_record(d: dict[str, Any]) -> tuple[str, str, int] | None:
    meta = d.get("meta") if isinstance(d.get("meta"), dict) else {}
    env, task, sample = d.get("env_id", d.get("env")), d.get("task_id"), meta.get("sample", d.get("sample"))
    if not isinstance(env, str) or not isinstance(task, str) or not isinstance(sample, int):
        return None
    return env, task, sample


# ---- output directory: reading back, repairing -------------------------------------------------

def cut_torn_tail(path: Path, parse: Callable[[str], Any]) -> str | None:
    """If ``path`` ends without a newline (a writer killed mid-line), terminate a last line that is
    complete, or cut an incomplete one off. Returns a note saying what was done, else None."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    with open(path, "rb+") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return None
        pos, chunk = size, 1 << 16
        while pos > 0:  # find the last newline
            pos = max(0, pos - chunk)
            f.seek(pos)
            block = f.read(min(chunk, size - pos))
            nl = block.rfind(b"\n")
            if nl >= 0:
                pos += nl + 1
                break
        f.seek(pos)
        tail = f.read()
        try:
            parse(tail.decode("utf-8"))
        except (ValueError, TypeError, KeyError, UnicodeDecodeError):
            f.truncate(pos)
            return f"{path}: cut off a torn last line ({len(tail)} bytes) left by an interrupted write"
        f.write(b"\n")
        return f"{path}: terminated a complete last line that lacked its newline"


@dataclass
class Progress:
    """What an eval directory already holds."""

    traces: dict[tuple[str, str, int], dict[str, Any]]
    """Readable traces by (env, task, sample), each as its verdict line (:func:`verdict_of`)."""
    verdicts: dict[tuple[str, str, int], dict[str, Any]]
    """Verdict lines by key: as written, or rebuilt from the trace when missing."""
    notes: list[str]


def read_progress(out: str | os.PathLike, repair: bool = True) -> Progress:
    """Read an eval directory back. Traces are the truth: a trace without a verdict line gets one
    (appended when ``repair``); verdict lines without a trace are reported and ignored; corrupt
    lines are reported with file and line (their episodes count as not done)."""
    out = Path(out)
    notes: list[str] = []
    tpath, vpath = out / TRACES, out / VERDICTS
    if repair:
        for p, parse in ((tpath, Episode.from_json), (vpath, json.loads)):
            note = cut_torn_tail(p, parse)
            if note:
                notes.append(note)
    traces: dict[tuple[str, str, int], dict[str, Any]] = {}
    errors: list[TraceError] = []
    if tpath.exists():
        for lineno, rec in iter_records(tpath, on_error="skip", errors=errors):
            key = _key_of_record(rec)
            if key is None:
                notes.append(f"{tpath}:{lineno}: not an eval episode (no env_id/task_id/meta.sample); ignored")
            elif key in traces:
                notes.append(f"{tpath}:{lineno}: duplicate episode {key}; the first one is kept")
            else:
                traces[key] = verdict_of(rec)  # not the whole record: memory stays small on big runs
    notes += [f"{e} (ignored; its episode is run again)" for e in errors]
    verdicts: dict[tuple[str, str, int], dict[str, Any]] = {}
    if vpath.exists():
        for lineno, v, error in json_lines(vpath):
            try:
                key = _key_of_record(v) if error is None and isinstance(v, dict) else None
            except ValueError as e:
                error = e
            if error is not None:
                notes.append(f"{vpath}:{lineno}: corrupt verdict line ({error}); rebuilt from its trace")
            elif key is None or key not in traces:
                notes.append(f"{vpath}:{lineno}: verdict without a trace {key}; ignored")
            elif key not in verdicts:
                verdicts[key] = v
    missing = [k for k in traces if k not in verdicts]
    if missing:
        rebuilt = {k: traces[k] for k in missing}
        verdicts.update(rebuilt)
        if repair:
            with open(vpath, "a", encoding="utf-8") as f:
                f.writelines(json.dumps(v, ensure_ascii=False) + "\n" for v in rebuilt.values())
        notes.append(f"{vpath}: {len(missing)} verdict line(s) rebuilt from their traces")
    return Progress(traces, verdicts, notes)


def check_run_file(out: Path, settings: dict[str, Any], has_episodes: bool) -> None:
    """Refuse to resume episodes played with other settings; a folder with no episode yet (a start that
    failed, e.g. on a bad --model) is not locked: its run.json is rewritten."""
    path = out / RUN
    if path.exists() and has_episodes:
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as e:
            raise ValueError(f"{path} is not JSON ({e}); remove it or use another --out") from None
        diff = [k for k in _RESUME_KEYS if k in old and old[k] != settings[k]]
        if diff:
            said = "; ".join(f"{k}: {old[k]!r} -> {settings[k]!r}" for k in diff)
            raise ValueError(f"{out} holds episodes played with other settings ({said}); "
                             "resume with the same settings or use another --out")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(settings, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _no_nan(x: Any) -> Any:
    """NaN (a mean over nothing) as null, so the file is strict JSON."""
    if isinstance(x, dict):
        return {k: _no_nan(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_no_nan(v) for v in x]
    return None if isinstance(x, float) and not math.isfinite(x) else x


def write_summary(out: str | os.PathLike, summary: dict[str, Any]) -> Path:
    path = Path(out) / SUMMARY
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(_no_nan(jsonable(summary)), indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
