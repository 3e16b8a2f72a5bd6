"""Run the OFFICIAL BFCL v3 checker (bfcl-eval==2025.8.6.2) on cases from a JSONL file.

This script runs inside a throwaway virtualenv that has bfcl-eval with its dependencies, never in the
project's environment (the project must not depend on the official checker). It is driven by
``benchmarks/bfcl_official_agreement.py`` and ``benchmarks/bench_bfcl_verifier.py``::

    /tmp/bfcl_official/bin/python benchmarks/bfcl_official_runner.py CASES.jsonl OUT.jsonl DATA_DIR

Each case line: {"key", "id", "category", "fmt", "result"}. Each output line: {"key", "valid",
"error_type"}; the last line is {"timing": {family: seconds}} (checking time only, decoding included).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENAI_API_KEY", "unused-by-the-checker")

from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING  # noqa: E402
from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # noqa: E402
from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils  # noqa: E402
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker  # noqa: E402
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import is_empty_execute_response  # noqa: E402
from bfcl_eval.utils import is_empty_output, is_function_calling_format_output  # noqa: E402

MODELS = {"prompt": "gpt-4o-2024-11-20", "fc": "gpt-4o-2024-11-20-FC"}
DOC_FILES = {
    "GorillaFileSystem": "gorilla_file_system.json", "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json", "TwitterAPI": "posting_api.json", "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json", "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}


def load_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def family(category: str) -> str:
    if "multi_turn" in category:
        return "multi_turn"
    if "relevance" in category:
        return "relevance"
    return "ast"


def main() -> int:
    cases_path, out_path, data_dir = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    cases = load_jsonl(cases_path)
    handlers = {}
    for fmt, name in MODELS.items():
        cfg = MODEL_CONFIG_MAPPING[name]
        h = cfg.model_handler(name, temperature=0)
        h.is_fc_model = cfg.is_fc_model
        handlers[fmt] = h
    prompts: dict[str, dict] = {}
    answers: dict[str, dict] = {}
    for cat in {c["category"] for c in cases}:
        for e in load_jsonl(data_dir / f"BFCL_v3_{cat}.json"):
            prompts[e["id"]] = e
        pa = data_dir / "possible_answer" / f"BFCL_v3_{cat}.json"
        if pa.exists():
            for a in load_jsonl(pa):
                answers[a["id"]] = a["ground_truth"]
    timing: dict[str, float] = {}
    with open(out_path, "w", encoding="utf-8") as out:
        for case in cases:
            t0 = time.perf_counter()
            try:
                valid, etype = check(case, handlers, prompts, answers)
            except Exception as e:  # the official runner would crash here
                valid, etype = False, f"official_crash:{type(e).__name__}"
            fam = family(case["category"])
            timing[fam] = timing.get(fam, 0.0) + time.perf_counter() - t0
            out.write(json.dumps({"key": case["key"], "valid": valid, "error_type": etype}) + "\n")
        out.write(json.dumps({"timing": timing}) + "\n")
    return 0


def check(case: dict, handlers: dict, prompts: dict, answers: dict) -> tuple[bool, str]:
    cat, fmt, result = case["category"], case["fmt"], case["result"]
    handler, model = handlers[fmt], MODELS[fmt]
    entry = prompts[case["id"]]
    if "multi_turn" in cat:
        return check_multi_turn(handler, model, cat, entry, answers[case["id"]], result)
    if "relevance" in cat:
        try:
            decoded = handler.decode_ast(result, language="Python")
            has_call = not is_empty_output(decoded)
        except Exception:
            has_call = False
        ok = (not has_call) if "irrelevance" in cat else has_call
        return ok, "" if ok else ("irrelevance_error:decoder_success" if "irrelevance" in cat
                                  else "relevance_error:decoder_failed")
    language = "Java" if "java" in cat and "javascript" not in cat else "JavaScript" if "javascript" in cat else "Python"
    try:
        decoded = handler.decode_ast(result, language)
    except Exception:
        return False, "ast_decoder:decoder_failed"
    if not is_function_calling_format_output(decoded):
        return False, "ast_decoder:decoder_wrong_output_format"
    r = ast_checker(entry["function"], decoded, answers[case["id"]], language, cat, model.replace("/", "_"))
    return r["valid"], r.get("error_type", "")


def check_multi_turn(handler, model: str, cat: str, entry: dict, gt: list, result) -> tuple[bool, str]:
    # Instances live in the module's globals keyed by model and entry: clear them so every case
    # starts fresh (the official runner evaluates each entry once per process).
    g = vars(multi_turn_utils)
    for k in [k for k in g if k.endswith("_instance")]:
        del g[k]
    if not isinstance(result, list):
        return False, "multi_turn:inference_error"
    if len(result) != len(gt):
        return False, "multi_turn:force_terminated"
    decoded = []
    for turn in result:
        steps = []
        for item in turn:
            try:
                d = handler.decode_execute(item)
                if is_empty_execute_response(d):
                    continue
                steps.append(d)
            except Exception:
                continue
        decoded.append(steps)
    test_entry = {"id": entry["id"], "initial_config": entry["initial_config"],
                  "involved_classes": entry["involved_classes"]}
    r = multi_turn_checker(decoded, gt, test_entry, cat, model.replace("/", "_"))
    return r["valid"], r.get("error_type", "")


if __name__ == "__main__":
    sys.exit(main())
