"""Run ACEBench's OFFICIAL evaluator functions (``eval_main.py``) on cases from a JSONL file.

Measurement only: this script runs in a throwaway environment that holds a reconstruction of the
official evaluation code, never in the project's environment, and the project never imports it. It is
driven by ``benchmarks/acebench_official_agreement.py`` and ``benchmarks/bench_acebench_verifier.py``::

    /tmp/acebench_official/venv/bin/python benchmarks/acebench_official_runner.py \\
        CASES.jsonl OUT.jsonl DATA_DIR [--official-dir /tmp/acebench_official] [--mode verdicts|bench|summary]

Setting up /tmp/acebench_official (upstream code is never committed to this repository):

1. Copy these files of ACEBench's evaluator (GitHub ``ACEBench/ACEBench``; the code used here was read
   from the fork ``zeppombal/ACEBench``: ``model_eval/evaluation_helper.py`` at commit
   ``ca2ac0ec359752e3143b752540475a1dfe331c96``, the others at ``c9391d09d1ae111e7d9a3d3c5cb30da2751ffa6d``,
   their newest versions in upstream's own formatting) byte for byte into /tmp/acebench_official,
   keeping their paths: ``eval_main.py``, ``category.py``, ``model_eval/checker.py``,
   ``model_eval/utils.py``, ``model_eval/evaluation_helper.py``, ``model_inference/utils.py``.
2. ``python3.11 -m venv /tmp/acebench_official/venv``; for the summary check also
   ``/tmp/acebench_official/venv/bin/pip install openpyxl`` (verdicts need no packages).

``evaluation_helper.py`` also imports pandas, openpyxl and ``model_inference.prompt_en/zh``, used only
to write Excel reports; when they are not importable this runner registers empty stand-ins for them,
and it always replaces ``convert_result_to_excel`` (the per-category Excel report) with a no-op and,
outside summary mode, ``save_score_as_json`` with an in-memory capture. Everything that decides a
verdict or a score is upstream's code.

Each case line: ``{"key", "id", "category", "language", "result"[, "process"]}``. Modes:

- ``verdicts``: each case is scored alone, by calling the official category function
  (``normal_single_turn_eval``, ``normal_multi_turn_eval``, ``special_eval`` or ``agent_eval``) on a
  one-entry list; the entry's verdict is the returned accuracy (so an entry whose first alternative
  fails but a later one passes counts as valid, as it does in upstream's accuracy). Output lines:
  ``{"key", "valid", "error_type"[, "process"]}``; an exception is ``official_crash:<type>``.
- ``bench``: the cases of each (round, language, category) are scored in one call, as ``eval_main``
  does (an optional ``"round"`` field, default 0, keeps several result sets apart); output lines
  ``{"round", "language", "category", "accuracy"[, "process_accuracy"]}``.
- ``summary`` (needs openpyxl in the throwaway venv): the cases of each (round, language) -- whole
  result sets of every category -- go through upstream's real score files,
  ``update_result_table_with_score_file`` and ``generate_result_csv``; the summary row is read back
  from the ``result.xlsx`` it writes. Output lines ``{"round", "language", "columns", "summary"}``.

The last line is always ``{"timing": {family: seconds}}``: time inside the official functions (in
bench mode per pass over the cases, each group being scored ``--inner`` times to lift short timings
above the clock's noise).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
import types
from pathlib import Path

MODEL_NAME = "gpt-4o-2024-11-20"  # any name without "FC": results are prompt-format strings
CASE_TIMEOUT_S = 20


def _stub_report_modules() -> None:
    """Empty stand-ins for the Excel-report imports of evaluation_helper, only when missing."""
    try:
        import pandas  # noqa: F401
    except ImportError:
        sys.modules["pandas"] = types.ModuleType("pandas")
    try:
        import openpyxl  # noqa: F401
        import openpyxl.styles  # noqa: F401
    except ImportError:
        opx = types.ModuleType("openpyxl")
        styles = types.ModuleType("openpyxl.styles")
        opx.Workbook = None
        styles.Alignment = None
        opx.styles = styles
        sys.modules["openpyxl"] = opx
        sys.modules["openpyxl.styles"] = styles
    for name in ("model_inference.prompt_en", "model_inference.prompt_zh"):
        try:
            __import__(name)
        except ImportError:
            sys.modules[name] = types.ModuleType(name)


def load_official(official_dir: Path):
    """Import upstream's eval_main from ``official_dir`` with the report side effects removed."""
    sys.path.insert(0, str(official_dir))
    _stub_report_modules()
    import eval_main  # the reconstructed official module

    captured: list = []
    eval_main.convert_result_to_excel = lambda *a, **k: None
    eval_main.save_score_as_json = lambda filename, data, subdir=None: captured.append(data)
    return eval_main, captured


def load_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def family(category: str) -> str:
    return "agent" if "agent" in category else "special" if "special" in category else "normal"


class _Timeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Timeout()


def call_category(em, category: str, language: str, rows: list, prompts: list, answers: list):
    """Upstream's dispatch in ``eval_main.runner``; returns (accuracy, process_accuracy or None)."""
    em.language = language
    paths = em.get_paths(language)
    if "special" in category:
        return em.special_eval(rows, prompts, answers, category, MODEL_NAME, paths), None
    if "agent" in category:
        return em.agent_eval(rows, prompts, answers, category, MODEL_NAME)
    if "normal_multi_turn" in category:
        return em.normal_multi_turn_eval(rows, prompts, answers, category, MODEL_NAME, paths), None
    return em.normal_single_turn_eval(rows, prompts, answers, category, MODEL_NAME, paths), None


def read_data(data_dir: Path, cases: list[dict]) -> tuple[dict, dict]:
    prompts: dict = {}
    answers: dict = {}
    for lang, cat in {(c["language"], c["category"]) for c in cases}:
        root = data_dir / f"data_{lang}"
        for q in load_jsonl(root / f"data_{cat}.json"):
            prompts[(lang, q["id"])] = q
        for a in load_jsonl(root / "possible_answer" / f"data_{cat}.json"):
            answers[(lang, a["id"])] = a
    return prompts, answers


def run_verdicts(em, captured: list, cases: list[dict], prompts: dict, answers: dict, out) -> dict:
    timing: dict[str, float] = {}
    signal.signal(signal.SIGALRM, _on_alarm)
    for case in cases:
        lang, cat = case["language"], case["category"]
        row = {"id": case["id"], "result": case["result"]}
        if "process" in case:
            row["process"] = case["process"]
        captured.clear()
        rec: dict = {"key": case["key"]}
        t0 = time.perf_counter()
        signal.alarm(CASE_TIMEOUT_S)
        try:
            acc, proc = call_category(
                em, cat, lang, [row], [prompts[(lang, case["id"])]], [answers[(lang, case["id"])]]
            )
            signal.alarm(0)
            rec["valid"] = acc == 1
            failed = [r for r in (captured[-1][1:] if captured else []) if r.get("valid") is False]
            rec["error_type"] = "" if rec["valid"] else (failed[0]["error_type"] if failed else "")
            if proc is not None:
                rec["process"] = proc
        except _Timeout:
            rec.update(valid=False, error_type="official_timeout")
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # upstream would crash on this entry (SystemExit included)
            signal.alarm(0)
            rec.update(valid=False, error_type=f"official_crash:{type(e).__name__}")
        fam = family(cat)
        timing[fam] = timing.get(fam, 0.0) + time.perf_counter() - t0
        out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return timing


def run_bench(em, cases: list[dict], prompts: dict, answers: dict, out, inner: dict | None = None) -> dict:
    groups: dict[tuple[int, str, str], list[dict]] = {}
    for c in cases:
        groups.setdefault((c.get("round", 0), c["language"], c["category"]), []).append(c)
    timing: dict[str, float] = {}
    for (rnd, lang, cat), group in groups.items():
        rows = [
            {"id": c["id"], "result": c["result"], **({"process": c["process"]} if "process" in c else {})}
            for c in group
        ]
        qs = [prompts[(lang, c["id"])] for c in group]
        ans = [answers[(lang, c["id"])] for c in group]
        fam = family(cat)
        loops = max(1, (inner or {}).get(fam, 1))
        t0 = time.perf_counter()
        try:
            for _ in range(loops):
                acc, proc = call_category(em, cat, lang, rows, qs, ans)
        except Exception as e:  # upstream crashes on the whole category file
            acc, proc = f"official_crash:{type(e).__name__}", None
        timing[fam] = timing.get(fam, 0.0) + (time.perf_counter() - t0) / loops
        rec = {"round": rnd, "language": lang, "category": cat, "accuracy": acc}
        if proc is not None:
            rec["process_accuracy"] = proc
        out.write(json.dumps(rec) + "\n")
    return timing


SUMMARY_VALUES = [  # what generate_result_csv writes under its (partly mislabelled) COLUMNS header
    "model",
    "bool",
    "enum",
    "number",
    "list",
    "object_deep",
    "object_short",
    "atom",
    "single_turn_single_function",
    "single_turn_parallel_function",
    "single_turn",
    "multi_turn_user_switch",
    "multi_turn_user_adjust",
    "multi_turn",
    "similar_api",
    "preference",
    "normal_summary",
    "incomplete",
    "error_param",
    "irrelevant",
    "special_summary",
    "agent_multi_turn",
    "agent_multi_turn_process",
    "agent_multi_step",
    "agent_multi_step_process",
    "agent_summary",
    "summary",
]


def run_summary(em, cases: list[dict], prompts: dict, answers: dict, out, work: str) -> dict:
    """Whole result sets through upstream's own score files, leaderboard table and result.xlsx."""
    import model_eval.utils as upstream_utils
    from openpyxl import load_workbook

    em.save_score_as_json = upstream_utils.save_score_as_json  # the real score files, this time
    groups: dict[tuple[int, str], list[dict]] = {}
    for c in cases:
        groups.setdefault((c.get("round", 0), c["language"]), []).append(c)
    for (rnd, lang), group in groups.items():
        score_dir = os.path.join(work, f"summary{rnd}{lang}") + os.sep
        em.OUTPUT_PATH = score_dir
        by_cat: dict[str, list[dict]] = {}
        for c in group:
            by_cat.setdefault(c["category"], []).append(c)
        for cat, rows in by_cat.items():
            model_rows = [
                {
                    "id": c["id"],
                    "result": c["result"],
                    **({"process": c["process"]} if "process" in c else {}),
                }
                for c in rows
            ]
            call_category(
                em,
                cat,
                lang,
                model_rows,
                [prompts[(lang, c["id"])] for c in rows],
                [answers[(lang, c["id"])] for c in rows],
            )
        table: dict = {}
        em.update_result_table_with_score_file(table, score_dir)
        em.generate_result_csv(table, score_dir)
        sheet = load_workbook(os.path.join(score_dir, "result.xlsx")).active
        header, values = [list(r) for r in sheet.iter_rows(min_row=1, max_row=2, values_only=True)]
        out.write(
            json.dumps(
                {
                    "round": rnd,
                    "language": lang,
                    "columns": header,
                    "summary": dict(zip(SUMMARY_VALUES, values)),
                }
            )
            + "\n"
        )
    return {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("data_dir", type=Path, help="the folder holding data_en/ and data_zh/")
    ap.add_argument("--official-dir", type=Path, default=Path("/tmp/acebench_official"))
    ap.add_argument("--mode", choices=["verdicts", "bench", "summary"], default="verdicts")
    ap.add_argument(
        "--inner",
        default="{}",
        help='bench: passes per family, e.g. {"special": 50}; the timing reported is per pass',
    )
    args = ap.parse_args(argv)
    if not (args.official_dir / "eval_main.py").exists():
        print(f"SKIP: no reconstructed official evaluator in {args.official_dir} (see this docstring)")
        return 2
    cases = load_jsonl(args.cases)
    prompts, answers = read_data(args.data_dir.resolve(), cases)
    em, captured = load_official(args.official_dir.resolve())
    out_path = args.out.resolve()
    with tempfile.TemporaryDirectory() as work:
        # agent_eval_process writes ./score_all/score_<lang>/<model>/...: keep that inside a temp dir
        os.chdir(work)
        em.OUTPUT_PATH = work
        for lang in ("en", "zh"):
            os.makedirs(os.path.join(work, "score_all", f"score_{lang}", MODEL_NAME), exist_ok=True)
        with open(out_path, "w", encoding="utf-8") as out:
            if args.mode == "verdicts":
                timing = run_verdicts(em, captured, cases, prompts, answers, out)
            elif args.mode == "bench":
                timing = run_bench(em, cases, prompts, answers, out, json.loads(args.inner))
            else:
                timing = run_summary(em, cases, prompts, answers, out, work)
            out.write(json.dumps({"timing": timing}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
