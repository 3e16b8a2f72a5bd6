"""Official and generic summaries of evaluation verdicts (used by :mod:`harness.evaluation.evaluate`).

Each benchmark's own scoring code computes its aggregate; this module only maps an env id to it::

    summary = summarize_verdicts(verdict_lines)       # lines as harness.evaluation.eval_dir.verdict_of writes them
    summary["envs"]["lopd/shop-v0"]["pass_rate"]      # generic, every env
    summary["benchmarks"]["bfcl-v3"]["official"]      # envs.bfcl.scoring.summarize's numbers
    print(format_summary(summary))

A benchmark outside :data:`SUMMARIZERS` gets only the generic summary; add one with
:func:`register_summarizer` (a function from verdict lines to a JSON-able dict). See docs/EVAL.md.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym

# ---- summaries -------------------------------------------------------------------------------

def generic_summary(verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean reward, pass rate and mean steps over episodes (NaN means when there are none)."""
    n = len(verdicts)
    if not n:
        return {"episodes": 0, "tasks": 0, "samples": 0, "mean_reward": math.nan, "pass_rate": math.nan,
                "mean_steps": math.nan}
    return {"episodes": n, "tasks": len({(v["env"], v["task_id"]) for v in verdicts}),
            "samples": len({v["sample"] for v in verdicts}),
            "mean_reward": sum(v["reward"] for v in verdicts) / n,
            "pass_rate": sum(bool(v["pass"]) for v in verdicts) / n,
            "mean_steps": sum(v["steps"] for v in verdicts) / n}


@dataclass(frozen=True)
class Summarizer:
    """How one benchmark turns verdict lines into its official summary.

    ``summarize`` gets the verdicts of one group (of one sample index when ``per_sample``; then the
    per-sample summaries are averaged leaf by leaf) and returns a JSON-able dict; ``group`` maps an
    env id to its group label (the envs scored together); ``format`` renders a summary as text.
    """

    source: str
    """The scoring code it calls, for the record."""
    summarize: Callable[[list[dict[str, Any]]], dict[str, Any]]
    group: Callable[[str], str]
    format: Callable[[dict[str, Any]], str] | None = None
    per_sample: bool = True


def _bfcl(vs: list[dict[str, Any]]) -> dict[str, Any]:
    from envs.bfcl.scoring import summarize

    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for v in vs:
        counts[v["category"]][0] += int(v["pass"])
        counts[v["category"]][1] += 1
    return summarize({c: (ok, n) for c, (ok, n) in counts.items()})


def _bfcl_format(s: dict[str, Any]) -> str:
    from envs.bfcl.scoring import format_summary

    return format_summary(s)


def _acebench(vs: list[dict[str, Any]]) -> dict[str, Any]:
    from envs.acebench.data import family_of
    from envs.acebench.scoring import Verdict, category_score, summary

    by_cat: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for v in sorted(vs, key=lambda v: (v["env"], v["task_index"] if v["task_index"] is not None else -1)):
        by_cat[v["category"]].append(v)
    scores = {}
    for cat, rows in by_cat.items():
        verdicts = []
        for v in rows:
            row = v["details"].get("verdict")
            agent = family_of(cat) == "agent"
            if isinstance(row, dict) and "valid" in row:
                verdicts.append(Verdict(v["task_id"], cat, bool(row["valid"]), str(row.get("error_type") or ""),
                                        row.get("error"), row.get("process", 0.0 if agent else None)))
            else:  # the episode ended before the env gave a verdict (context or turn limit)
                verdicts.append(Verdict(v["task_id"], cat, False, "no_verdict", v["stop"], 0.0 if agent else None))
        scores[cat] = category_score(cat, verdicts, [v["task_id"] for v in rows])
    return {**summary(scores), "categories": {c: asdict(s) for c, s in scores.items()}}


def _acebench_format(s: dict[str, Any]) -> str:
    from envs.acebench.scoring import format_summary

    return format_summary(s, list(s.get("categories", {})), digits=4)


def flat_format(s: dict[str, Any]) -> str:
    """``key  value`` lines for the numbers at the top level of a summary (nested parts left out)."""
    keys = [k for k, v in s.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    width = max([len(k) for k in keys] + [1])
    return "\n".join(f"{k:<{width}}  {s[k]}" if isinstance(s[k], int) else f"{k:<{width}}  {s[k]:.4f}"
                     for k in keys)


def _envscaler(vs: list[dict[str, Any]]) -> dict[str, Any]:
    from envs.envscaler.metrics import summarize

    return summarize([{"reward": v["reward"], "steps": v["steps"]} for v in vs])


def _by_task(vs: list[dict[str, Any]], ok: Callable[[dict[str, Any]], bool]) -> dict[str, list[bool]]:
    out: dict[str, list[bool]] = defaultdict(list)
    for v in sorted(vs, key=lambda v: v["sample"]):
        out[v["task_id"]].append(ok(v))
    return dict(out)


def _evalplus(vs: list[dict[str, Any]]) -> dict[str, Any]:
    from envs.evalplus.scoring import pass_at_k

    vd = [v["details"].get("verdict") or {} for v in vs]
    return {"dataset": vs[0]["env"].removeprefix("lopd/evalplus-").removesuffix("-v0"),
            "mode": next((d.get("mode") for d in vd if d.get("mode")), "unknown"), "samples": len(vs),
            "tasks": len({v["task_id"] for v in vs}), "tasks_missing": 0,
            "errors": sum(1 for d in vd if d.get("error")),
            "pass@k": {"base": pass_at_k(_by_task(vs, lambda v: (v["details"].get("verdict") or {})
                                                   .get("base_status") == "pass")),
                       "plus": pass_at_k(_by_task(vs, lambda v: bool(v["pass"])))}}


def _evalplus_format(s: dict[str, Any]) -> str:
    from envs.evalplus.scoring import format_summary

    return format_summary(s)


def _livecodebench(vs: list[dict[str, Any]]) -> dict[str, Any]:
    from envs.livecodebench.scoring import pass_at_k

    vd = [v["details"].get("verdict") or {} for v in vs]
    return {"mode": next((d.get("mode") for d in vd if d.get("mode")), "unknown"),
            "problems": len({v["task_id"] for v in vs}), "samples": len(vs),
            "pass@k": pass_at_k(_by_task(vs, lambda v: bool(v["pass"]))),
            "public_only": any("note" in d for d in vd)}


def _livecodebench_format(s: dict[str, Any]) -> str:
    from envs.livecodebench.scoring import format_summary

    return format_summary(s)


def _per_env(env_id: str) -> str:
    return env_id


SUMMARIZERS: dict[str, Summarizer] = {
    "bfcl": Summarizer("envs.bfcl.scoring.summarize", _bfcl, lambda e: "bfcl-v3", _bfcl_format),
    "acebench": Summarizer("envs.acebench.scoring.category_score + summary", _acebench,
                           lambda e: "acebench-" + ("zh" if "-zh-" in e else "en"), _acebench_format),
    "envscaler": Summarizer("envs.envscaler.metrics.summarize", _envscaler, _per_env, flat_format),
    "micro": Summarizer("envs.envscaler.metrics.summarize", _envscaler, _per_env, flat_format),
    "evalplus": Summarizer("envs.evalplus.scoring.pass_at_k", _evalplus, _per_env, _evalplus_format, False),
    "livecodebench": Summarizer("envs.livecodebench.scoring.pass_at_k", _livecodebench, _per_env,
                                _livecodebench_format, False),
}
"""Official summaries by env package (``envs.<package>``). Add a benchmark with :func:`register_summarizer`."""


def register_summarizer(package: str, summarizer: Summarizer) -> None:
    """Give the envs of ``envs.<package>`` an official summary (replaces an existing one)."""
    SUMMARIZERS[package] = summarizer


def env_package(env_id: str) -> str | None:
    """The ``envs`` sub-package an env id's entry point lives in (None for foreign envs)."""
    import envs  # noqa: F401  (registers the lopd/* ids)

    try:
        ep = gym.spec(env_id).entry_point
    except gym.error.Error:  # not registered
        return None
    mod = ep.split(":")[0] if isinstance(ep, str) else getattr(ep, "__module__", "")
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "envs" else None


def _mean_tree(items: list[Any]) -> Any:
    """Leaf-by-leaf mean of equally shaped summaries (numbers averaged, other leaves from the first)."""
    first = items[0]
    if isinstance(first, dict):
        return {k: _mean_tree([i[k] for i in items if isinstance(i, dict) and k in i]) for k in first}
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        nums = [i for i in items if isinstance(i, (int, float)) and not isinstance(i, bool)]
        return first if all(n == first for n in nums) else sum(map(float, nums)) / len(nums)
    return first


def summarize_verdicts(verdicts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The summary of an eval directory's verdicts: generic per env, official per benchmark group.

    A summarizer that fails (e.g. an unfinished benchmark API) falls back to the generic summary of
    its group, with the reason in ``fallback``.
    """
    vs = list(verdicts)
    by_env: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for v in vs:
        by_env[v["env"]].append(v)
    out: dict[str, Any] = {"episodes": len(vs), "envs": {e: generic_summary(r) for e, r in sorted(by_env.items())},
                           "benchmarks": {}}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for env_id, rows in by_env.items():
        pkg = env_package(env_id)
        if pkg in SUMMARIZERS:
            groups[(pkg, SUMMARIZERS[pkg].group(env_id))].extend(rows)
    for (pkg, label), rows in sorted(groups.items(), key=lambda kv: kv[0][1]):
        s = SUMMARIZERS[pkg]
        entry: dict[str, Any] = {"source": s.source, "envs": sorted({r["env"] for r in rows}),
                                 "samples": len({r["sample"] for r in rows})}
        try:
            if s.per_sample:
                per = [s.summarize([r for r in rows if r["sample"] == k]) for k in sorted({r["sample"] for r in rows})]
                entry["official"] = _mean_tree(per)
                if len(per) > 1:
                    entry["per_sample"] = per
            else:
                entry["official"] = s.summarize(rows)
        except Exception as e:  # noqa: BLE001 - a broken or unfinished scorer must not lose the run
            entry.update(source="generic", fallback=f"{s.source} failed: {type(e).__name__}: {e}"[:500],
                         official=generic_summary(rows))
        out["benchmarks"][label] = entry
    return out


def format_summary(summary: dict[str, Any]) -> str:
    """The printed table: generic numbers per env, then each benchmark's official summary."""
    envs_ = summary["envs"]
    width = max([len(e) for e in envs_] + [3])
    lines = [f"{'env':<{width}}  episodes  tasks  samples  mean_reward  pass_rate  mean_steps"]
    for e, s in envs_.items():
        lines.append(f"{e:<{width}}  {s['episodes']:>8}  {s['tasks']:>5}  {s['samples']:>7}  {s['mean_reward']:>11.4f}"
                     f"  {s['pass_rate']:>9.4f}  {s['mean_steps']:>10.2f}")
    for label, b in summary["benchmarks"].items():
        how = f"mean over {b['samples']} sample runs" if b["samples"] > 1 and "per_sample" in b else "all samples"
        lines += ["", f"== {label}: {b['source']} ({how}) =="]
        if "fallback" in b:
            lines.append(f"(fallback to the generic summary: {b['fallback']})")
        pkg = env_package(b["envs"][0])
        fmt = SUMMARIZERS[pkg].format if pkg in SUMMARIZERS and "fallback" not in b else flat_format
        try:
            lines.append(fmt(b["official"]) if fmt else json.dumps(b["official"], indent=1))
        except Exception as e:  # noqa: BLE001 - the JSON summary is still written
            lines.append(f"(cannot format: {type(e).__name__}: {e}) " + json.dumps(b["official"]))
    return "\n".join(lines)
