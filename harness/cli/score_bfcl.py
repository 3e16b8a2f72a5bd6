"""``lopd score bfcl-v3``: score BFCL-v3 result files with the official rules.

    lopd score bfcl-v3 --results result/my-model [--format fc|prompt] [--out verdicts.jsonl]

``--results`` is a folder in BFCL's layout: one ``BFCL_v3_<category>_result.json`` per category, each
line a JSON object ``{"id": ..., "result": ...}``. FC results are lists of ``{name: json-args}``
(dots in names written as underscores); prompting results are ``"[f(a=1)]"`` strings; multi-turn
results are, per turn, the list of the model's raw step outputs. Categories without a file are
reported as N/A (and count as 0 in the aggregates, as upstream). An entry of a scored category with
no readable result line fails as ``missing_result``; unreadable lines are reported with file and
line number and never stop the run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register_score(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("bfcl-v3", help="score BFCL-v3 result files (BFCL_v3_<category>_result.json)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", required=True, help="folder holding BFCL_v3_<category>_result.json files")
    p.add_argument("--format", dest="fmt", choices=["fc", "prompt"], default="fc",
                   help="result format: fc (lists of {name: json-args}) or prompt ('[f(a=1)]' strings)")
    p.add_argument("--out", default=None, help="write per-entry verdicts here as JSONL")
    p.add_argument("--model-name", default="lopd",
                   help="model name used for BFCL's instance variable names in multi-turn execution")
    p.set_defaults(func=run)


def read_results(path: Path, warn: Any) -> dict[str, Any]:
    """id -> result from one result file; bad lines are reported through ``warn`` and skipped."""
    from envs.data import json_lines

    out: dict[str, Any] = {}
    for n, obj, error in json_lines(path):
        if error is not None:
            warn(f"{path.name}:{n}: not valid JSON ({str(error)[:120]}); line skipped")
        elif not isinstance(obj, dict) or "id" not in obj or "result" not in obj:
            warn(f"{path.name}:{n}: expected an object with 'id' and 'result'; line skipped")
        elif str(obj["id"]) in out:
            warn(f"{path.name}:{n}: duplicate id {str(obj['id'])!r}; the first line is kept")
        else:
            out[str(obj["id"])] = obj["result"]
    return out


def _error_text(error: list[Any]) -> str:
    parts = [e if isinstance(e, str) else json.dumps(e, default=repr, ensure_ascii=False) for e in error]
    return " ".join(parts)[:2000]


def run(args: argparse.Namespace) -> int:
    from envs.bfcl.data import CATEGORIES, PREFIX, load_entries
    from envs.bfcl.scoring import format_summary, score_entry, summarize

    folder = Path(args.results)
    if not folder.is_dir():
        raise FileNotFoundError(f"results folder not found: {folder}")
    files = {c: folder / f"{PREFIX}_{c}_result.json" for c in CATEGORIES}
    present = {c: p for c, p in files.items() if p.is_file()}
    if not present:
        raise FileNotFoundError(f"no {PREFIX}_<category>_result.json files in {folder}")
    warnings: list[str] = []

    def warn(msg: str) -> None:
        warnings.append(msg)
        print(f"warning: {msg}", file=sys.stderr)

    counts: dict[str, tuple[int, int]] = {}
    sizes: dict[str, int] = {}
    out = open(args.out, "w", encoding="utf-8") if args.out else None
    try:
        for cat in CATEGORIES:
            entries = load_entries(cat)
            sizes[cat] = len(entries)
            if cat not in present:
                continue
            results = read_results(present[cat], warn)
            known = {e.id for e in entries}
            extra = [k for k in results if k not in known]
            if extra:
                warn(f"{present[cat].name}: {len(extra)} id(s) not in the {cat} data, ignored (e.g. {extra[0]!r})")
            correct = 0
            for e in entries:
                if e.id not in results:
                    valid, etype, err = False, "missing_result", "no readable result line for this id"
                else:
                    v = score_entry(e, results[e.id], args.fmt, args.model_name)
                    valid, etype, err = v.valid, v.error_type, _error_text(v.error)
                correct += valid
                if out:
                    out.write(json.dumps({"id": e.id, "category": cat, "valid": valid, "error_type": etype,
                                          "error": err}, ensure_ascii=False) + "\n")
            counts[cat] = (correct, len(entries))
    finally:
        if out:
            out.close()
    print(format_summary(summarize(counts, sizes)))
    if warnings:
        print(f"{len(warnings)} warning(s); see above.", file=sys.stderr)
    return 0
