"""LiveCodeBench code-generation problems in the official ``code_generation_lite`` row format.

A source is a JSONL file, or a directory holding the official release files ``test.jsonl`` ..
``test6.jsonl``. Releases are cumulative: ``release_v1`` = test.jsonl, ``release_v2`` adds test2.jsonl,
... ``release_latest`` = every file present; ``v1`` .. ``v6`` alone select one file. A date window
(``start_date``/``end_date``, inclusive, on ``contest_date``) narrows any selection::

    from envs.livecodebench.data import load_problems
    probs = load_problems("/data/lcb", release="release_v5", start_date="2024-08-01")

``private_test_cases`` is either a JSON string or base64(zlib(pickle(JSON string))). The encoded
form is decoded only for files the caller points at, with an unpickler that accepts nothing but a
plain string (no classes, no calls), so even a hostile file cannot run code.

The staged ``lcb_codegen_lite_release_v6_public_tests.jsonl`` has no private tests: scores on it are
public-test scores, NOT LiveCodeBench results (``Problem.public_only`` is True for its rows).
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from envs.data import require_data

RELEASE_FILES = ["test.jsonl", "test2.jsonl", "test3.jsonl", "test4.jsonl", "test5.jsonl", "test6.jsonl"]
STAGED_FILE = "lcb_codegen_lite_release_v6_public_tests.jsonl"
PUBLIC_ONLY_NOTE = (
    "public tests only: this is NOT a LiveCodeBench score (the official private tests are "
    "missing from the staged data)"
)
_MAX_PRIVATE_BYTES = 1 << 30


@dataclass
class Test:
    input: str
    output: str
    testtype: str
    """'stdin' or 'functional'."""


@dataclass
class Problem:
    question_id: str
    question_title: str
    question_content: str
    platform: str
    contest_id: str
    contest_date: datetime
    starter_code: str
    difficulty: str
    public_tests: list[Test]
    private_tests: list[Test]
    metadata: dict[str, Any] = field(default_factory=dict)
    public_only: bool = False
    """No private tests in the source row: grading it is not an official LiveCodeBench score."""

    @property
    def func_name(self) -> str | None:
        """Set for call-based (LeetCode) problems."""
        return self.metadata.get("func_name")

    @property
    def tests(self) -> list[Test]:
        """Public then private, the order lcb_runner grades in."""
        return self.public_tests + self.private_tests

    def evaluation_sample(self) -> dict[str, Any]:
        """lcb_runner's ``get_evaluation_sample``: inputs, outputs and fn_name."""
        return {
            "inputs": [t.input for t in self.tests],
            "outputs": [t.output for t in self.tests],
            "fn_name": self.func_name,
        }


class _StringOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # no globals: no classes, no callables
        raise pickle.UnpicklingError(f"refusing {module}.{name} in private_test_cases")


def decode_private_tests(value: str) -> list[dict[str, Any]]:
    """JSON, or base64 -> zlib -> pickle -> JSON as in code_generation_lite. Raises ValueError."""
    try:
        return json.loads(value)
    except ValueError:
        pass
    try:
        raw = zlib.decompressobj().decompress(
            base64.b64decode(value.encode("utf-8"), validate=False), _MAX_PRIVATE_BYTES
        )
        obj = _StringOnlyUnpickler(io.BytesIO(raw)).load()
    except (ValueError, zlib.error, pickle.UnpicklingError, EOFError) as e:
        raise ValueError(f"private_test_cases is neither JSON nor an encoded test list: {e}") from None
    if not isinstance(obj, str):
        raise ValueError(f"encoded private_test_cases holds a {type(obj).__name__}, expected a JSON string")
    return json.loads(obj)


def _tests(rows: Any, where: str) -> list[Test]:
    if not isinstance(rows, list):
        raise ValueError(f"{where}: tests must be a list")
    out = []
    for t in rows:
        if not isinstance(t, dict) or not all(
            isinstance(t.get(k), str) for k in ("input", "output", "testtype")
        ):
            raise ValueError(f"{where}: a test needs string input, output and testtype")
        out.append(Test(t["input"], t["output"], t["testtype"]))
    return out


def parse_row(row: dict[str, Any], where: str = "row") -> Problem:
    """One HF row -> Problem (ValueError on a malformed row)."""
    try:
        public = _tests(json.loads(row["public_test_cases"]), f"{where} public_test_cases")
        private_raw = row.get("private_test_cases") or "[]"
        private = _tests(decode_private_tests(private_raw), f"{where} private_test_cases")
        meta = row.get("metadata") or "{}"
        meta = json.loads(meta) if isinstance(meta, str) else dict(meta)
        return Problem(
            question_id=str(row["question_id"]),
            question_title=str(row.get("question_title", "")),
            question_content=str(row["question_content"]),
            platform=str(row.get("platform", "")),
            contest_id=str(row.get("contest_id", "")),
            contest_date=datetime.fromisoformat(str(row["contest_date"])),
            starter_code=str(row.get("starter_code") or ""),
            difficulty=str(row.get("difficulty", "")),
            public_tests=public,
            private_tests=private,
            metadata=meta,
            public_only=not private,
        )
    except (KeyError, TypeError) as e:
        raise ValueError(f"{where}: not a code_generation_lite row ({type(e).__name__}: {e})") from None


def release_files(release: str) -> list[str]:
    """The official files of a release name (release_vN cumulative, vN alone, release_latest)."""
    if release == "release_latest":
        return list(RELEASE_FILES)
    if (
        release.startswith("release_v")
        and release[9:].isdigit()
        and 1 <= int(release[9:]) <= len(RELEASE_FILES)
    ):
        return RELEASE_FILES[: int(release[9:])]
    if release.startswith("v") and release[1:].isdigit() and 1 <= int(release[1:]) <= len(RELEASE_FILES):
        return [RELEASE_FILES[int(release[1:]) - 1]]
    raise ValueError(
        f"unknown release {release!r}: use release_v1..release_v{len(RELEASE_FILES)}, "
        f"release_latest or v1..v{len(RELEASE_FILES)}"
    )


def _date(value: str | datetime | None) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value)


def read_jsonl(path: Path) -> list[Problem]:
    problems = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    row = json.loads(line)
                except ValueError as e:
                    raise ValueError(f"{path}:{n}: not JSON ({e})") from None
                problems.append(parse_row(row, f"{path}:{n}"))
    return problems


def load_problems(
    source: str | Path | None = None,
    release: str | None = None,
    start_date: str | datetime | None = None,
    end_date: str | datetime | None = None,
) -> list[Problem]:
    """Problems of a file or release directory (default: the staged public-test file), filtered.

    ``release`` applies to a directory of official files; for a single file every row is used.
    """
    path = Path(source) if source is not None else require_data("livecodebench", STAGED_FILE)
    if path.is_dir():
        files = release_files(release or "release_latest")
        present = [path / f for f in files if (path / f).exists()]
        if not present:
            raise FileNotFoundError(f"{path} holds none of {files}")
        problems = [p for f in present for p in read_jsonl(f)]
    else:
        if not path.exists():
            raise FileNotFoundError(f"no LiveCodeBench problems file at {path}")
        if release is not None:
            raise ValueError(
                "release selection needs a directory of the official test*.jsonl files; "
                "for a single file use start_date/end_date"
            )
        problems = read_jsonl(path)
    lo, hi = _date(start_date), _date(end_date)
    return [
        p for p in problems if (lo is None or p.contest_date >= lo) and (hi is None or p.contest_date <= hi)
    ]
