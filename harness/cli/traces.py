"""``lopd traces export|import``: our traces as a Hugging Face dataset of OpenAI-style rows, and back
(docs/TRACES.md)::

    lopd traces export runs/lopd/traces.jsonl --out datasets/lopd --format hf
    lopd traces import datasets/lopd --out runs/imported/traces.jsonl
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("traces", help="traces as Hugging Face datasets (OpenAI messages) and back")
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    e = sub.add_parser("export", help="trace JSONL files as a dataset, one row an episode")
    e.add_argument("traces", nargs="+", help="trace JSONL files, or run directories (their traces.jsonl)")
    e.add_argument("--out", required=True,
                   help="hf: the folder save_to_disk writes; openai-jsonl: the file to write")
    e.add_argument("--format", choices=["hf", "openai-jsonl"], default="hf")
    e.add_argument("--force", action="store_true", help="overwrite an existing --out")
    e.add_argument("--skip-bad", action="store_true", help="skip corrupt lines (each is reported) instead of failing")
    e.set_defaults(func=run_export)
    i = sub.add_parser("import", help="a dataset (saved folder, parquet, OpenAI JSONL) as trace JSONL")
    i.add_argument("source", help="a folder save_to_disk wrote, a .parquet file, or a JSONL file of rows")
    i.add_argument("--out", required=True, help="the trace JSONL file to write")
    i.add_argument("--append", action="store_true", help="append to an existing --out")
    i.add_argument("--skip-bad", action="store_true", help="skip rows that are no episode (each is reported)")
    i.set_defaults(func=run_import)


def _refuse_existing(out: Path, flag: str, ok: bool) -> None:
    if out.exists() and not ok and (out.is_file() or any(out.iterdir())):
        raise FileExistsError(f"--out {out} exists; pass {flag} to {'add to' if flag == '--append' else 'replace'} it")


def _report(errors: list) -> None:
    for e in errors:
        print(f"skipped {e}", file=sys.stderr)


def run_export(args: argparse.Namespace) -> int:
    from envs.trace import read_traces
    from harness.config import check_output
    from harness.stats import trace_file
    from harness.traces import write_hf, write_openai_jsonl

    out = Path(args.out)
    check_output(out, "--out", folder=args.format == "hf")
    _refuse_existing(out, "--force", args.force)
    files = [trace_file(t) for t in args.traces]  # every input checked before any is read
    errors: list = []
    on_error = "skip" if args.skip_bad else "raise"
    episodes = [ep for f in files for ep in read_traces(f, on_error=on_error, errors=errors)]
    _report(errors)
    if not episodes:
        raise ValueError(f"no episodes found in {', '.join(map(str, files))}")
    if args.format == "hf":
        import datasets

        datasets.disable_progress_bars()
        if out.is_dir() and args.force:
            import shutil

            shutil.rmtree(out)  # save_to_disk keeps stray files of an older dataset otherwise
        n = write_hf(episodes, out)
    else:
        n = write_openai_jsonl(episodes, out)
    print(f"exported {n} episodes to {out} ({args.format})")
    return 0


def run_import(args: argparse.Namespace) -> int:
    from envs.trace import write_traces
    from harness.config import check_output
    from harness.traces import is_rows_source, read_episodes

    src, out = Path(args.source), Path(args.out)
    if not src.exists():
        raise FileNotFoundError(f"{src}: no such file or folder")
    if not is_rows_source(src):
        raise ValueError(f"{src} is not a dataset of rows (a trace JSONL already, or no saved dataset)")
    check_output(out, "--out", folder=False)
    _refuse_existing(out, "--append", args.append)
    errors: list = []
    episodes = list(read_episodes(src, on_error="skip" if args.skip_bad else "raise", errors=errors))
    _report(errors)
    n = write_traces(out, episodes)
    print(f"imported {n} episodes from {src} into {out}")
    return 0
