"""Score BFCL v3 results entry by entry, and aggregate them the official way.

``score_entry(entry, result, fmt)`` -> :class:`Verdict` for one raw result (what BFCL stores under
``"result"``): a string for the prompting format, a list of ``{name: json-args}`` for FC; multi-turn
results are per turn, per step, such raw outputs.

``summarize({category: (correct, total)})`` -> the leaderboard numbers: per category accuracy;
non-live = unweighted mean of [mean(simple, java, javascript), multiple, parallel, parallel_multiple,
irrelevance]; live = count-weighted over its six categories; multi-turn = mean of its four;
overall = mean of (live, non-live, multi-turn). A category that was not scored counts as 0 (and is
shown as N/A), as upstream does.

>>> s = summarize({c: (1, 1) for c in CATEGORIES})
>>> s["overall"], s["non_live"], s["live"], s["multi_turn"]
(1.0, 1.0, 1.0, 1.0)
"""

from __future__ import annotations

from typing import Any, Literal

from envs.bfcl.ast_checker import Verdict, check_ast
from envs.bfcl.data import CATEGORIES, LIVE, MULTI_TURN, NON_LIVE, Entry
from envs.bfcl.decode import DecodeError, is_empty_output, is_function_calling_format, try_decode_ast
from envs.bfcl.multi_turn import DEFAULT_MODEL_NAME, score_multi_turn_result

Fmt = Literal["prompt", "fc"]
FORMATS = ("prompt", "fc")


def decode_ast(result: Any, fmt: str, language: str = "Python") -> Any:
    """Decode a single-turn result for the AST checker; raises DecodeError on failure."""
    decoded, error = try_decode_ast(result, fmt, language)
    if error is not None:
        raise DecodeError(error)
    return decoded


def relevance_verdict(category: str, result: Any, fmt: str) -> Verdict:
    """irrelevance/live_irrelevance pass without a real call; live_relevance needs one."""
    decoded, error = try_decode_ast(result, fmt, "Python")
    has_call = error is None and not is_empty_output(decoded)
    if "irrelevance" in category:
        if has_call:
            return Verdict(False, "irrelevance_error:decoder_success",
                           ["Valid syntax. Successfully decode AST when it should not."])
        return Verdict(True)
    if not has_call:
        return Verdict(False, "relevance_error:decoder_failed",
                       [f"Invalid syntax. Failed to decode AST when it should have. {error or ''}"])
    return Verdict(True)


def ast_verdict(entry: Entry, result: Any, fmt: str) -> Verdict:
    if entry.answer is None:
        return Verdict(False, "ast:no_ground_truth", ["entry has no ground truth"])
    decoded, error = try_decode_ast(result, fmt, entry.language)
    if error is not None:
        return Verdict(False, "ast_decoder:decoder_failed", [f"Invalid syntax. Failed to decode AST. {error}"])
    if not is_function_calling_format(decoded):
        return Verdict(False, "ast_decoder:decoder_wrong_output_format",
                       ["Did not output in the specified format."])
    try:
        return check_ast(entry.functions, decoded, entry.answer, entry.language, entry.category,
                         underscore_names=(fmt == "fc"))
    except RecursionError:
        return Verdict(False, "ast_checker:checker_error", ["output nested too deeply"])
    except Exception as e:  # where the official checker raises, the entry cannot pass
        return Verdict(False, "ast_checker:checker_error", [f"{type(e).__name__}: {e}"[:300]])


def score_entry(entry: Entry, result: Any, fmt: str, model_name: str = DEFAULT_MODEL_NAME) -> Verdict:
    """The official verdict for one raw result of one entry. Never raises on model output."""
    if fmt != "fc" and fmt != "prompt":
        raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
    category = entry.category
    if "multi_turn" in category:
        try:
            return score_multi_turn_result(result, entry, fmt, model_name)
        except RecursionError:
            return Verdict(False, "multi_turn:checker_error", ["output nested too deeply"])
        except Exception as e:
            return Verdict(False, "multi_turn:checker_error", [f"{type(e).__name__}: {e}"[:300]])
    if "relevance" in category:
        return relevance_verdict(category, result, fmt)
    return ast_verdict(entry, result, fmt)


# ---- aggregation ------------------------------------------------------------------------------

def summarize(counts: dict[str, tuple[int, int]], dataset_sizes: dict[str, int] | None = None) -> dict[str, Any]:
    """Official aggregate scores from per-category (correct, total) counts.

    ``dataset_sizes`` gives the weight of a category that was not scored (upstream uses the data file
    size); by default its weight is 0-accuracy with its count taken from ``counts`` or 0.
    """
    sizes = dataset_sizes or {}
    cat: dict[str, dict[str, Any]] = {}
    for c in CATEGORIES:
        if c in counts and counts[c][1] > 0:
            ok, n = counts[c]
            cat[c] = {"accuracy": ok / n, "correct": ok, "total": n, "scored": True}
        else:
            cat[c] = {"accuracy": 0.0, "correct": 0, "total": sizes.get(c, 0), "scored": False}

    def mean(names: list[str] | list[float]) -> float:
        vals = [cat[n]["accuracy"] if isinstance(n, str) else n for n in names]
        return sum(vals) / len(vals)

    def weighted(names: list[str]) -> float:
        total = sum(cat[n]["total"] for n in names)
        return sum(cat[n]["accuracy"] * cat[n]["total"] for n in names) / total if total else 0.0

    simple = mean(["simple", "java", "javascript"])
    non_live_ast = mean([simple, cat["multiple"]["accuracy"], cat["parallel"]["accuracy"],
                         cat["parallel_multiple"]["accuracy"]])
    non_live = mean([simple, cat["multiple"]["accuracy"], cat["parallel"]["accuracy"],
                     cat["parallel_multiple"]["accuracy"], cat["irrelevance"]["accuracy"]])
    live_ast = weighted(["live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"])
    live = weighted(LIVE)
    multi_turn = mean(MULTI_TURN)
    return {
        "overall": (live + non_live + multi_turn) / 3,
        "non_live": non_live, "non_live_ast": non_live_ast, "non_live_simple": simple,
        "live": live, "live_ast": live_ast,
        "multi_turn": multi_turn,
        "relevance": cat["live_relevance"]["accuracy"],
        "irrelevance": mean(["irrelevance", "live_irrelevance"]),
        "categories": cat,
    }


AGGREGATE_PARTS: dict[str, list[str]] = {
    "overall": CATEGORIES, "non_live": NON_LIVE, "non_live_ast": NON_LIVE[:-1],
    "non_live_simple": NON_LIVE[:3], "live": LIVE, "live_ast": LIVE[:4], "multi_turn": MULTI_TURN,
    "irrelevance": ["irrelevance", "live_irrelevance"],
}
"""The categories each aggregate of :func:`summarize` covers (an aggregate of none scored is N/A)."""


def format_summary(summary: dict[str, Any]) -> str:
    """The official summary table as text (percentages; N/A for a category not scored, and for an
    aggregate none of whose categories was: its number is upstream's 0, not a measurement)."""
    cat = summary["categories"]

    def pct(v: float) -> str:
        return f"{100 * v:.2f}%"

    rows: list[tuple[str, str | None, str | None]] = [  # (label, aggregate, category)
        ("Overall Acc", "overall", None),
        ("Non-Live Overall Acc", "non_live", None),
        ("  Non-Live AST Summary", "non_live_ast", None),
        ("  Non-Live Simple AST", "non_live_simple", None),
        ("    Python Simple AST", None, "simple"),
        ("    Java Simple AST", None, "java"),
        ("    JavaScript Simple AST", None, "javascript"),
        ("  Non-Live Multiple AST", None, "multiple"),
        ("  Non-Live Parallel AST", None, "parallel"),
        ("  Non-Live Parallel Multiple AST", None, "parallel_multiple"),
        ("  Non-Live Irrelevance Detection", None, "irrelevance"),
        ("Live Overall Acc", "live", None),
        ("  Live AST Summary", "live_ast", None),
        ("  Live Simple AST", None, "live_simple"),
        ("  Live Multiple AST", None, "live_multiple"),
        ("  Live Parallel AST", None, "live_parallel"),
        ("  Live Parallel Multiple AST", None, "live_parallel_multiple"),
        ("  Live Irrelevance Detection", None, "live_irrelevance"),
        ("  Live Relevance Detection", None, "live_relevance"),
        ("Multi Turn Overall Acc", "multi_turn", None),
        ("  Multi Turn Base", None, "multi_turn_base"),
        ("  Multi Turn Miss Func", None, "multi_turn_miss_func"),
        ("  Multi Turn Miss Param", None, "multi_turn_miss_param"),
        ("  Multi Turn Long Context", None, "multi_turn_long_context"),
        ("Relevance Detection", None, "live_relevance"),
        ("Irrelevance Detection", "irrelevance", None),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [f"{'BFCL-v3':<{width}}  {'score':>8}  correct/total"]
    for label, key, name in rows:
        if key is not None:
            scored = any(cat[c]["scored"] for c in AGGREGATE_PARTS[key])
            lines.append(f"{label:<{width}}  {pct(summary[key] or 0.0) if scored else 'N/A':>8}")
            continue
        info = cat[name]
        shown = pct(info["accuracy"]) if info["scored"] else "N/A"
        counts = f"  {info['correct']}/{info['total']}" if info["scored"] else ""
        lines.append(f"{label:<{width}}  {shown:>8}{counts}")
    return "\n".join(lines)
