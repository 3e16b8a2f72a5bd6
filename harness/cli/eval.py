"""``lopd eval``: run a model on registered envs or benchmark splits; traces, verdicts, summary.

    lopd eval --env lopd/bfcl-v3-simple-v0,lopd/shop-v0 --model runs/tiny-1m --engine hf --n-samples 2 --out runs/eval-a
    lopd eval --env lopd/envscaler-v0 --model /models/Qwen3-8B --engine sglang --server-url http://127.0.0.1:30000 \\
              --concurrency 64 --out runs/eval-qwen
    lopd eval --env lopd/shop-v0 --model harness/pinned_base --engine vllm --launch 1 --out runs/eval-vllm
    lopd stats runs/eval-a/traces.jsonl --by category

Rerunning the same command resumes: finished (task, sample) pairs are skipped. See docs/EVAL.md.
"""

from __future__ import annotations

import argparse
import json
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("eval", help="evaluate a model on envs or benchmark splits (resumable)")
    p.add_argument("--env", action="append", required=True, metavar="ID[,ID...]",
                   help="env ids (repeatable or comma-separated), e.g. lopd/bfcl-v3-simple-v0")
    p.add_argument("--model", required=True, help="model directory, or micro:pinned (servers: its tokenizer and config are read)")
    p.add_argument("--engine", choices=["hf", "vllm", "sglang"], default="hf")
    p.add_argument("--out", required=True, help="output directory; an existing one is resumed")
    p.add_argument("--n-samples", type=int, default=1, help="episodes per task (default 1)")
    p.add_argument("--split", help="only tasks of this split (e.g. eval, test)")
    p.add_argument("--limit", type=int, help="only the first N tasks of each env")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--top-k", type=int, default=20)
    p.add_argument("--max-new-tokens", type=int, default=1024, help="most tokens per assistant turn")
    p.add_argument("--seed", type=int, default=0, help="base seed of the per-episode seeds (-1: unseeded)")
    p.add_argument("--max-turns", type=int, default=30)
    p.add_argument("--max-context-tokens", type=int, default=32768)
    p.add_argument("--batch-size", type=int, default=8, help="hf: episodes batched together")
    p.add_argument("--concurrency", type=int, default=32, help="servers: episodes in flight at once")
    p.add_argument("--server-url", action="append", default=[], metavar="URL",
                   help="vllm/sglang: a running server (repeatable: episodes are balanced across them)")
    p.add_argument("--launch", type=int, default=0, metavar="N", help="vllm/sglang: start N servers on --model")
    p.add_argument("--server-python", default="", help="interpreter of launched servers (vllm: .venv-vllm)")
    p.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                   help="extra argument of launched servers (repeatable), e.g. --server-arg=--max-model-len=4096")
    p.add_argument("--server-wait", type=float, default=None, metavar="SECONDS",
                   help="vllm/sglang: how long a server may take to answer /health (default: 900 for a launched "
                        "server, 30 for a running one)")
    p.add_argument("--device", help="hf: device (default cuda if available, else cpu)")
    p.add_argument("--dtype", help="hf: bfloat16, float16, float32 or auto (default bf16 on cuda, fp32 on cpu)")
    p.add_argument("--env-kwargs", action="append", default=[], metavar="[ID=]JSON",
                   help="gym.make keyword arguments as a JSON object, for every env or (ID=JSON) for one; "
                        "e.g. 'lopd/acebench-normal-en-v0={\"categories\": [\"normal_atom_bool\"]}'")
    p.add_argument("--template-kwargs", default="{}", metavar="JSON",
                   help="chat template variables, e.g. '{\"enable_thinking\": false}'")
    p.add_argument("--run-name", help="meta.run of the traces (default: the --out directory name)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=run)


def _json_object(text: str, what: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ValueError(f"{what} is not JSON ({e}): {text!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object, got {text!r}")  # noqa: TRY004 - the CLI reports ValueErrors
    return value


def parse_env_kwargs(items: list[str]) -> dict[str, dict]:
    """``--env-kwargs`` values -> {env id or '*': kwargs}."""
    out: dict[str, dict] = {}
    for item in items:
        item = item.strip()
        if item.startswith("{"):
            out.setdefault("*", {}).update(_json_object(item, "--env-kwargs"))
            continue
        env_id, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"--env-kwargs wants JSON or ID=JSON, got {item!r}")
        out.setdefault(env_id.strip(), {}).update(_json_object(text, f"--env-kwargs for {env_id}"))
    return out


def _engine(args: argparse.Namespace):
    from harness.engines.server import EngineConfig

    if args.engine == "hf":
        return EngineConfig()
    urls = args.server_url or ([] if args.launch else
                               ["http://127.0.0.1:30000" if args.engine == "sglang" else "http://127.0.0.1:8000"])
    wait = {} if args.server_wait is None else {"startup_timeout": args.server_wait}
    if args.server_wait is not None and not args.server_wait > 0:
        raise ValueError(f"--server-wait must be a number of seconds > 0, got {args.server_wait}")
    return EngineConfig(kind=args.engine, urls=urls, launch=args.launch, python=args.server_python,
                        extra_args=list(args.server_arg), **wait)


def run(args: argparse.Namespace) -> int:
    from harness.evaluation.evaluate import EvalRunConfig, format_summary, resolve_env_id, run_eval

    env_ids = [e.strip() for group in args.env for e in group.split(",") if e.strip()]
    if not env_ids:
        raise ValueError("--env names no env")
    kwargs = parse_env_kwargs(args.env_kwargs)
    kwargs = {k if k == "*" else resolve_env_id(k): v for k, v in kwargs.items()}
    cfg = EvalRunConfig(
        envs=env_ids, model=args.model, out=args.out, engine=_engine(args), n_samples=args.n_samples,
        split=args.split, limit=args.limit, temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
        max_new_tokens=args.max_new_tokens, seed=None if args.seed < 0 else args.seed, max_turns=args.max_turns,
        max_context_tokens=args.max_context_tokens, batch_size=args.batch_size, concurrency=args.concurrency,
        device=args.device, dtype=args.dtype, env_kwargs=kwargs,
        template_kwargs=_json_object(args.template_kwargs, "--template-kwargs"), run_name=args.run_name,
    )
    from harness.engines import EngineError

    try:
        res = run_eval(cfg, log=(lambda s: None) if args.quiet else None)
    except EngineError as e:  # e.g. no server at --server-url: a message, not a traceback
        print(f"lopd eval: error: {e}", file=sys.stderr)
        return 2
    print(format_summary(res.summary))
    print(f"\n{res.ran} episodes run, {res.skipped} already done, {len(res.failed)} failed; "
          f"outputs in {res.out}", file=sys.stderr)
    if res.failed:
        print("failed episodes are not written; rerun the same command to retry them", file=sys.stderr)
        return 1
    return 0
