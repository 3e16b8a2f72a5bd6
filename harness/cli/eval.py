"""``lopd eval``: run a model on registered envs or benchmark splits; traces, verdicts, summary.

    lopd eval --env lopd/micro-v0 --model micro:pinned --limit 8 --out runs/eval-a   # the model's own turn limits
    lopd eval --env lopd/bfcl-v3-simple-v0,lopd/shop-v0 --model micro:pinned --n-samples 2 --out runs/eval-b
    lopd eval --env lopd/envscaler-v0 --model /models/Qwen3-8B --engine sglang --server-url http://127.0.0.1:30000 \\
              --concurrency 64 --out runs/eval-qwen
    lopd eval --env lopd/shop-v0 --model harness/pinned_base --engine vllm --launch 1 --out runs/eval-vllm
    lopd eval --env mypkg:lopd/todo-v0 --model micro:pinned --out runs/eval-todo   # imports mypkg first
    lopd stats runs/eval-a/traces.jsonl --by category

Rerunning the same command resumes: finished (task, sample) pairs are skipped. See docs/EVAL.md.
"""

from __future__ import annotations

import argparse
import json
import sys


def _flag(name: str):
    """Flag ``--NAME`` parsed and range-checked as EvalRunConfig's field (one rule for both)."""
    from harness.config import arg_type

    return arg_type("harness.evaluation.evaluate:EvalRunConfig", name)


def register(subparsers: argparse._SubParsersAction) -> None:
    from harness.config import arg_type

    engine = "harness.engines.server:EngineConfig"  # --launch and --server-wait share its fields' rules
    p = subparsers.add_parser("eval", help="evaluate a model on envs or benchmark splits (resumable)")
    p.add_argument("--env", action="append", required=True, metavar="ID[,ID...]",
                   help="env ids (repeatable or comma-separated), e.g. lopd/bfcl-v3-simple-v0")
    p.add_argument("--model", required=True, help="model directory, or micro:pinned (servers: its tokenizer and config are read)")
    p.add_argument("--engine", choices=["hf", "vllm", "sglang"], default="hf")
    p.add_argument("--out", required=True, help="output directory; an existing one is resumed")
    p.add_argument("--n-samples", type=_flag("n_samples"), default=1, help="episodes per task (default 1)")
    p.add_argument("--split", help="only tasks of this split (e.g. eval, test)")
    p.add_argument("--limit", type=_flag("limit"), help="only the first N tasks of each env")
    p.add_argument("--temperature", type=_flag("temperature"), default=0.7)
    p.add_argument("--top-p", type=_flag("top_p"), default=0.95)
    p.add_argument("--top-k", type=int, default=20)
    p.add_argument("--max-new-tokens", type=_flag("max_new_tokens"), help="most tokens per assistant turn (default: the model "
                   "folder's lopd_defaults.json, else 1024)")
    p.add_argument("--seed", type=int, default=0, help="base seed of the per-episode seeds (-1: unseeded)")
    p.add_argument("--max-turns", type=_flag("max_turns"), help="most assistant turns per episode (default: the model folder's, "
                   "else 30)")
    p.add_argument("--max-context-tokens", type=_flag("max_context_tokens"), help="episode token limit (default: the model folder's, "
                   "else 32768)")
    p.add_argument("--batch-size", type=_flag("batch_size"), default=8, help="hf: episodes batched together")
    p.add_argument("--concurrency", type=_flag("concurrency"), default=32, help="servers: episodes in flight at once")
    p.add_argument("--server-url", action="append", default=[], metavar="URL",
                   help="vllm/sglang: a running server (repeatable: episodes are balanced across them)")
    p.add_argument("--launch", type=arg_type(engine, "launch"), default=0, metavar="N", help="vllm/sglang: start N servers on --model")
    p.add_argument("--server-python", default="", help="interpreter of launched servers (vllm: .venv-vllm)")
    p.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                   help="extra argument of launched servers (repeatable), e.g. --server-arg=--max-model-len=4096")
    p.add_argument("--server-wait", type=arg_type(engine, "startup_timeout"), default=None, metavar="SECONDS",
                   help="vllm/sglang: how long a server may take to answer /health (default: 900 for a launched "
                        "server, 30 for a running one)")
    p.add_argument("--device", type=_flag("device"), help="hf: device (default cuda if available, else cpu)")
    p.add_argument("--dtype", type=_flag("dtype"), help="hf: bfloat16, float16, float32 or auto (default bf16 on cuda, fp32 on cpu)")
    p.add_argument("--env-kwargs", action="append", default=[], metavar="[ID=]JSON",
                   help="gym.make keyword arguments as a JSON object, for every env or (ID=JSON) for one; "
                        "e.g. 'lopd/acebench-normal-en-v0={\"categories\": [\"normal_atom_bool\"]}'")
    p.add_argument("--env-url", action="append", default=[], metavar="ID=URL",
                   help="play env ID on the server at URL (`lopd serve ID`), through lopd/remote-v0; its kwargs "
                        "are the server's")
    p.add_argument("--template-kwargs", default="{}", metavar="JSON",
                   help="chat template variables, e.g. '{\"enable_thinking\": false}'")
    p.add_argument("--run-name", help="meta.run of the traces (default: the --out directory name)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr (warnings still show)")
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


def parse_env_urls(items: list[str]) -> dict[str, str]:
    """``--env-url ID=URL`` values -> {env id: url}."""
    out = {}
    for item in items:
        env_id, sep, url = item.partition("=")
        if not sep or not env_id.strip() or not url.strip():
            raise ValueError(f"--env-url wants ID=URL (lopd/shop-v0=http://host:8000), got {item!r}")
        out[env_id.strip()] = url.strip()
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


def _limits(args: argparse.Namespace, env_ids: list[str], kwargs: dict[str, dict]) -> dict[str, int]:
    """The turn limits: a flag, else the model folder's lopd_defaults.json, else EvalRunConfig's defaults.
    The folder's env kwargs go under the ``--env-kwargs`` of its env, when that env is played (in place)."""
    from harness.models.defaults import read_model_defaults

    found = read_model_defaults(args.model)
    out, taken = {}, []
    for name in ("max_new_tokens", "max_turns", "max_context_tokens"):
        flag, wish = getattr(args, name), getattr(found[0], name) if found else None
        if flag is not None or wish is not None:
            out[name] = flag if flag is not None else wish
            taken += [f"--{name.replace('_', '-')} {wish}"] if flag is None else []
    menv = found[0].env if found else None
    if menv and menv.id in env_ids and menv.kwargs:
        given = {**kwargs.get("*", {}), **kwargs.get(menv.id, {})}
        kwargs[menv.id] = {**menv.kwargs, **given}
        used = {k: v for k, v in menv.kwargs.items() if k not in given}
        taken += [f"{menv.id} kwargs {json.dumps(used)}"] if used else []
    if taken:
        print(f"lopd eval: defaults from {found[1]}: {', '.join(taken)} (flags override them)", file=sys.stderr)
    return out


def run(args: argparse.Namespace) -> int:
    from harness.evaluation.evaluate import EvalRunConfig, format_summary, resolve_env_id, run_eval

    from harness.config import check_output

    check_output(args.out, "--out", folder=True)
    env_ids = [e.strip() for group in args.env for e in group.split(",") if e.strip()]
    if not env_ids:
        raise ValueError("--env names no env")
    urls = parse_env_urls(args.env_url)
    kwargs = parse_env_kwargs(args.env_kwargs)
    kwargs = {k if k == "*" else resolve_env_id(k): v for k, v in kwargs.items()}
    limits = _limits(args, [resolve_env_id(e) for e in env_ids if e not in urls], kwargs)  # served: server's kwargs
    cfg = EvalRunConfig(
        envs=env_ids, model=args.model, out=args.out, engine=_engine(args), n_samples=args.n_samples,
        split=args.split, limit=args.limit, temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
        seed=None if args.seed < 0 else args.seed, batch_size=args.batch_size, concurrency=args.concurrency,
        device=args.device, dtype=args.dtype, env_kwargs=kwargs, env_urls=urls, **limits,
        template_kwargs=_json_object(args.template_kwargs, "--template-kwargs"), run_name=args.run_name,
    )
    from harness.engines import EngineError

    try:
        res = run_eval(cfg, log=(lambda s: None) if args.quiet else None,  # --quiet: progress only
                       warn=lambda s: print(s, file=sys.stderr, flush=True))
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
