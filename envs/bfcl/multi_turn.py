"""BFCL v3 multi-turn checking (base, miss_func, miss_param, long_context), incremental or batch.

The rules (bfcl-eval 2025.8.6.2): the model's decoded calls and the ground-truth calls run on two
separate sets of fresh instances. After each turn whose ground truth is non-empty:

1. the turn must contain at least one decoded step (``multi_turn:empty_turn_model_response``);
2. state check: every public attribute of every ground-truth instance equals the model's
   (``multi_turn:instance_state_mismatch``);
3. response check: the multiset of this turn's ground-truth results is contained in *all* the
   model's results so far (``multi_turn:execution_response_mismatch``).

A turn with an empty ground truth (the withheld-function or missing-parameter turn) is executed but
not checked. The first failure decides; all-or-nothing per entry. A result with a different number of
turns than the ground truth (the model was force-quit after more than 20 steps in a turn before the
last turn) fails as ``multi_turn:force_terminated``.

>>> from envs.bfcl.data import load_entries                                   # doctest: +SKIP
>>> e = load_entries("multi_turn_base")[0]                                     # doctest: +SKIP
>>> check_multi_turn([[[c] for c in turn] for turn in e.answer], e).valid      # doctest: +SKIP
True
"""

from __future__ import annotations

from typing import Any

from envs.bfcl.ast_checker import Verdict
from envs.bfcl.data import Entry
from envs.bfcl.decode import DecodeError, decode_execute_fc, decode_execute_prompt, is_empty_execute
from envs.bfcl.execution import ApiSession, missing_results, state_differences

MAX_STEPS_PER_TURN = 20
"""BFCL's MAXIMUM_STEP_LIMIT: a turn's 21st executed step force-quits the inference."""
DEFAULT_MODEL_NAME = "lopd"


class MultiTurnRun:
    """Feed the model's steps turn by turn; ``end_turn`` applies the checks for that turn.

    ``verdict`` holds the first failure (or stays valid). The ground truth of a turn runs at its end,
    after the model's steps of that turn, in the same order as the official checker.
    """

    def __init__(self, entry: Entry, model_name: str = DEFAULT_MODEL_NAME):
        self.entry = entry
        self.model = ApiSession(entry.id, entry.involved_classes, entry.initial_config, f"{model_name}_eval")
        self.truth = ApiSession(entry.id, entry.involved_classes, entry.initial_config,
                                f"{model_name}_ground_truth_eval")
        self.turn = 0
        self.turn_steps = 0
        self.all_model_results: list[str] = []
        self.failure: Verdict | None = None

    def step(self, calls: list[str]) -> list[str]:
        """Execute one decoded, non-empty step of the current turn; returns the results as text."""
        results = self.model.execute(calls)
        self.all_model_results.extend(results)
        self.turn_steps += 1
        return results

    def end_turn(self) -> Verdict | None:
        """Run this turn's ground truth and checks; advance to the next turn."""
        idx = self.turn
        answer = self.entry.answer[idx] if idx < len(self.entry.answer) else []
        gt_results = self.truth.execute(answer)
        steps = self.turn_steps
        self.turn += 1
        self.turn_steps = 0
        if self.failure is not None or not answer:
            return self.failure
        if steps == 0:
            self.failure = Verdict(False, "multi_turn:empty_turn_model_response",
                                   [f"Model response list is empty for turn {idx}"])
            return self.failure
        diffs = state_differences(self.model.instances, self.truth.instances)
        if diffs:
            cls_name = next(iter(diffs))
            self.failure = Verdict(False, "multi_turn:instance_state_mismatch", [
                f"Model instance for {cls_name} does not match the state with ground truth instance.",
                {"differences": {c: {a: {k: repr(v) for k, v in d.items()} for a, d in attrs.items()}
                                 for c, attrs in diffs.items()}}])
            return self.failure
        missing = missing_results(gt_results, self.all_model_results)
        if missing:
            self.failure = Verdict(False, "multi_turn:execution_response_mismatch", [
                f"Model response execution results so far does not contain all the ground truth "
                f"response execution results for turn {idx}.", {"missing_items": missing}])
        return self.failure

    @property
    def verdict(self) -> Verdict:
        return self.failure or Verdict(True)


def decode_step(step: Any, fmt: str) -> list[str] | None:
    """Decode one raw model step; None when it does not decode or decodes to no call."""
    try:
        calls = decode_execute_fc(step) if fmt == "fc" else decode_execute_prompt(step)
    except (DecodeError, RecursionError):
        return None
    except Exception:  # upstream skips a step on any decoding exception
        return None
    return None if is_empty_execute(calls) else calls


def check_multi_turn(decoded_turns: list[list[list[str]]], entry: Entry,
                     model_name: str = DEFAULT_MODEL_NAME) -> Verdict:
    """Check already-decoded turns (per turn, per step, call strings) against the ground truth."""
    if entry.answer is None:
        return Verdict(False, "multi_turn:no_ground_truth", ["entry has no ground truth"])
    if len(decoded_turns) != len(entry.answer):
        return Verdict(False, "multi_turn:force_terminated", [
            f"Model was force-terminated during inference phase. The length of the model result turns "
            f"({len(decoded_turns)}) does not match the length of the ground truth turns ({len(entry.answer)})."])
    run = MultiTurnRun(entry, model_name)
    for steps in decoded_turns:
        for calls in steps:
            run.step(calls)
        if run.end_turn() is not None:
            return run.failure  # type: ignore[return-value]
    return run.verdict


def score_multi_turn_result(result: Any, entry: Entry, fmt: str, model_name: str = DEFAULT_MODEL_NAME) -> Verdict:
    """Score a raw result (per turn, a list of raw model steps) as BFCL's multi-turn runner does."""
    if not isinstance(result, list):
        return Verdict(False, "multi_turn:inference_error",
                       ["Error during inference phase. Model did not output a list of model responses."])
    decoded: list[list[list[str]]] = []
    for turn in result:
        try:
            steps = list(turn)
        except TypeError:
            return Verdict(False, "multi_turn:inference_error", [f"turn is not a list: {turn!r}"[:300]])
        decoded.append([c for c in (decode_step(s, fmt) for s in steps) if c is not None])
    return check_multi_turn(decoded, entry, model_name)
