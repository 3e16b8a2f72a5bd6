"""``lopd stats TRACES...``: tool-call behaviour statistics, tables and figures (of traces or datasets of rows).

    lopd stats runs/base/traces.jsonl runs/lopd/traces.jsonl --by run --compare base lopd --plot figs/
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    from harness.config import PosInt, arg_type

    p = subparsers.add_parser("stats", help="tool-call behaviour statistics from trace files")
    p.add_argument("traces", nargs="+", help="trace JSONL files, run directories (their traces.jsonl), or datasets "
                   "of OpenAI-style rows: save_to_disk folders, parquet, JSONL (docs/TRACES.md)")
    p.add_argument("--by", choices=["env", "learner", "run", "category"], default="run",
                   help="group episodes by this key (run: meta.run, else the file name; for traces.jsonl its folder's)")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), help="A -> B table with deltas (group names)")
    p.add_argument("--format", choices=["text", "csv", "json"], default="text")
    p.add_argument("--out", help="write the table here instead of stdout")
    p.add_argument("--plot", metavar="DIR", help="write distributions.png and calls_by_tool.png here")
    p.add_argument("--metrics", nargs="+", metavar="FILE",
                   help="training metrics JSONL files: also plot reward against generations (needs --plot)")
    p.add_argument("--skip-bad", action="store_true", help="skip corrupt lines (each is reported) instead of failing")
    p.add_argument("--success-threshold", type=float, default=1.0, help="reward that counts as success")
    p.add_argument("--workers", type=arg_type(PosInt), metavar="N",
                   help="processes reading the traces (default: min(2, CPUs) for inputs over 32 MiB, else 1)")
    p.set_defaults(func=run)


def _render(rows: list[dict], tools: list[dict], fmt: str) -> str:
    """The metric rows, then the calls-per-tool rows: one list (JSON), one table (CSV), two tables (text)."""
    from harness.stats import format_table

    if fmt == "json":
        clean = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                 for r in rows + tools]
        return json.dumps(clean, indent=1)
    if fmt == "csv":
        fields = list(rows[0]) if rows else []
        fields += [k for k in (tools[0] if tools else {}) if k not in fields]
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=fields, restval="")  # a metric row has no tool, a tool row no mean
        w.writeheader()
        w.writerows(rows + tools)
        return buf.getvalue()
    text = format_table(rows)
    if tools:
        text += "\n\ncalls per tool\n" + format_table([{k: v for k, v in r.items() if k != "metric"} for r in tools])
    return text


def run(args: argparse.Namespace) -> int:
    from harness.stats import collect, compare_rows, table_rows, tool_rows

    if args.metrics and not args.plot:  # checked first: no reading of traces for a run that plots nothing
        raise ValueError("--metrics needs --plot DIR (the reward curve is a figure)")
    from harness.config import check_input_files, check_output

    if args.out:  # before the traces are read: a wrong output path fails at once
        check_output(args.out, "--out", folder=False)
    if args.plot:
        check_output(args.plot, "--plot", folder=True)
    check_input_files(args.metrics or [], "--metrics")
    errors: list = []
    groups = collect(args.traces, args.by, skip_bad=args.skip_bad, errors=errors,
                     success_threshold=args.success_threshold, workers=args.workers)
    for e in errors:
        print(f"skipped {e}", file=sys.stderr)
    if not groups:
        print(f"lopd stats: no episodes found in {', '.join(args.traces)}", file=sys.stderr)
        return 2
    rows = compare_rows(groups, *args.compare) if args.compare else table_rows(groups)
    text = _render(rows, tool_rows(groups, args.compare), args.format)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    else:
        print(text)
    if args.plot:
        from pathlib import Path

        from harness.stats.plots import plot_calls_by_tool, plot_distributions, plot_learning_curves

        out = Path(args.plot)
        made = [plot_distributions(groups, out / "distributions.png"), plot_calls_by_tool(groups, out / "calls_by_tool.png")]
        if args.metrics:
            made.append(plot_learning_curves(args.metrics, out / "reward_vs_generations.png"))
        print("figures: " + ", ".join(map(str, made)), file=sys.stderr)
    return 0
