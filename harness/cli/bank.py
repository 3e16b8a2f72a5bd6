"""``lopd bank``: build, extend, query and inspect an experience bank (lopd.bank).

    lopd bank build --traces runs/a/traces.jsonl runs/b/traces.jsonl --out runs/bank --set min_reward=1.0
    lopd bank add runs/bank --traces runs/c/traces.jsonl
    lopd bank query runs/bank "Cancel order 7 and refund it" -k 3 --env lopd/envscaler-v0
    lopd bank stats runs/bank
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bank", help="build, extend, query and inspect an experience bank")
    sub = parser.add_subparsers(dest="bank_command", metavar="ACTION")

    b = sub.add_parser("build", help="build a bank from trace JSONL files (training split, successful only)")
    b.add_argument("--traces", nargs="+", required=True, metavar="FILE", help="episode trace JSONL files")
    b.add_argument("--out", required=True, metavar="DIR", help="bank directory to write")
    b.add_argument("--config", metavar="YAML", help="BankConfig YAML file")
    b.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="BankConfig overrides, e.g. min_reward=0.8 embed_text=task index=hnsw")
    b.add_argument("--force", action="store_true", help="replace an existing bank at --out")
    b.set_defaults(func=_user_errors(_build))

    a = sub.add_parser("add", help="add trace files to a bank without rebuilding it")
    a.add_argument("dir", metavar="DIR")
    a.add_argument("--traces", nargs="+", required=True, metavar="FILE")
    a.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="runtime overrides (device, batch_size)")
    a.set_defaults(func=_user_errors(_add))

    q = sub.add_parser("query", help="show the experiences retrieved for a task text, with scores")
    q.add_argument("dir", metavar="DIR")
    q.add_argument("task", help="the task text")
    q.add_argument("-k", type=int, default=None, help="how many (default: the bank's top_k)")
    q.add_argument("--env", default=None, help="only this env id")
    q.add_argument("--task-id", default=None, help="the query's task id, whose own entries are excluded")
    q.add_argument("--include-self", action="store_true", help="do not exclude the task's own entries")
    q.add_argument("--chars", type=int, default=800, help="show at most this many characters per experience")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="runtime overrides (device, ...)")
    q.set_defaults(func=_user_errors(_query))

    s = sub.add_parser("stats", help="entries, envs, tasks, index kinds, size on disk")
    s.add_argument("dir", metavar="DIR")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(func=_user_errors(_stats))

    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def _runtime(items: list[str]) -> dict:
    """``key=value`` items -> type-checked BankConfig values for just those keys."""
    from harness.config import load_config, parse_override
    from lopd.bank import BankConfig

    cfg = load_config(BankConfig, None, items)
    keys = [parse_override(item)[0][0] for item in items]
    return {k: getattr(cfg, k) for k in keys}


def _user_errors(handler):
    # Disk problems (an existing non-bank directory, permissions) are user errors, not tracebacks.
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except (FileExistsError, NotADirectoryError, PermissionError, IsADirectoryError) as e:
            print(f"lopd bank {args.bank_command}: error: {e}", file=sys.stderr)
            return 2
    return run


def _report(report) -> None:
    print(report.summary())
    if report.skipped_split:
        print(f"note: {report.skipped_split} episode(s) from non-training splits were refused", file=sys.stderr)
    for err in report.errors[:20]:
        print(f"warning: unreadable trace line {err}", file=sys.stderr)


def _build(args: argparse.Namespace) -> int:
    from harness.config import check_input_files, check_output, load_config
    from lopd.bank import BankConfig, ExperienceBank
    from lopd.bank.store import is_bank

    cfg = load_config(BankConfig, args.config, args.set)  # settings, then paths: all before any work
    check_input_files(args.traces, "--traces")
    check_output(args.out, "--out", folder=True)
    if is_bank(args.out) and not args.force:
        print(f"lopd bank build: {args.out} already holds a bank; use `lopd bank add` or --force", file=sys.stderr)
        return 2
    bank = ExperienceBank.build(args.traces, cfg)
    _report(bank.last_report)
    version = bank.save(args.out)
    print(f"wrote {len(bank)} experience(s) to {args.out} ({version})")
    return 0


def _open(directory: str, overrides: list[str]) -> Any:
    """The saved bank in ``directory`` with its own embedder: the lexical ``HashingEmbedder`` when the bank
    was built with it (its manifest says so; ``bank.embedder=hashing`` in a train config), else its model."""
    from lopd.bank import ExperienceBank
    from lopd.bank.store import read_snapshot

    _, manifest = read_snapshot(directory, verify=False)
    ident = manifest.get("embedder") or {}
    embedder = None
    if ident.get("name") == "HashingEmbedder":
        from harness.learners.privileged import HashingEmbedder

        embedder = HashingEmbedder(dim=int(ident.get("dim") or manifest.get("dim") or 512))
    return ExperienceBank.load(directory, embedder=embedder, **_runtime(overrides))


def _add(args: argparse.Namespace) -> int:
    from harness.config import check_input_files

    check_input_files(args.traces, "--traces")
    bank = _open(args.dir, args.set)
    before = len(bank)
    report = bank.add_traces(args.traces)
    _report(report)
    if len(bank) == before:
        print(f"nothing new; {args.dir} unchanged ({len(bank)} experience(s))")
        return 0
    version = bank.save(args.dir)
    print(f"added {len(bank) - before}; {args.dir} now holds {len(bank)} experience(s) ({version})")
    return 0


def _query(args: argparse.Namespace) -> int:
    from lopd.bank.render import cut

    bank = _open(args.dir, args.set)
    hits = bank.search_one(args.task, args.k, env=args.env, task_id=args.task_id,
                           exclude_self=False if args.include_self else None)
    if args.json:
        print(json.dumps([{"rank": r, "id": h.id, "score": h.score, **h.experience.to_dict()}
                          for r, h in enumerate(hits, 1)], ensure_ascii=False, indent=1))
        return 0
    if not hits:
        print("no experiences found")
    for r, h in enumerate(hits, 1):
        e = h.experience
        print(f"#{r}  score={h.score:.4f}  env={e.env_id}  task={e.task_id}  reward={e.reward:g}  source={e.source}")
        print("    " + cut(e.text, args.chars).replace("\n", "\n    "))
        print()
    return 0


def _stats(args: argparse.Namespace) -> int:
    from lopd.bank import ExperienceBank
    from lopd.bank.store import disk_bytes

    bank = ExperienceBank.load(args.dir)
    st = {**bank.stats(), "disk_bytes": disk_bytes(args.dir)}
    if args.json:
        print(json.dumps(st, indent=1))
        return 0
    print(f"bank {args.dir} ({st['version']}): {st['entries']} experiences, {st['tasks']} tasks, "
          f"dim {st['dim']}, {st['disk_bytes'] / 1e6:.2f} MB on disk")
    print(f"model {st['model']}; embeds {st['embed_text']}; mean text {st['mean_text_chars']:.0f} chars")
    for env, e in sorted(st["envs"].items()):
        print(f"  {env}: {e['entries']} entries, {e['tasks']} tasks, index {e['index']}, "
              f"mean reward {e['mean_reward']:.3f}")
    return 0
