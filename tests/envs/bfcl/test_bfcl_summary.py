"""BFCL-v3 official aggregates (``summarize``) against numbers worked out by hand from BENCHMARKS.md."""
import re

import pytest

from envs.bfcl.scoring import format_summary, summarize

# (correct, total) per category, with uneven totals so that weighted and unweighted means differ.
COUNTS = {
    "simple": (3, 4), "java": (1, 2), "javascript": (0, 1), "multiple": (1, 5), "parallel": (2, 2),
    "parallel_multiple": (1, 4), "irrelevance": (3, 10),
    "live_simple": (2, 3), "live_multiple": (10, 20), "live_parallel": (0, 1),
    "live_parallel_multiple": (1, 2), "live_irrelevance": (30, 40), "live_relevance": (1, 4),
    "multi_turn_base": (1, 2), "multi_turn_miss_func": (0, 3), "multi_turn_miss_param": (3, 4),
    "multi_turn_long_context": (1, 1),
}

# non-live = unweighted mean of [mean(simple, java, javascript), multiple, parallel, parallel_multiple,
# irrelevance]
SIMPLE = (3 / 4 + 1 / 2 + 0 / 1) / 3                           # 5/12
NON_LIVE = (SIMPLE + 1 / 5 + 2 / 2 + 1 / 4 + 3 / 10) / 5       # 13/30
NON_LIVE_AST = (SIMPLE + 1 / 5 + 2 / 2 + 1 / 4) / 4            # 7/15
# live = count-weighted over its six categories: all correct / all total (the plain mean would be 4/9)
LIVE = (2 + 10 + 0 + 1 + 30 + 1) / (3 + 20 + 1 + 2 + 40 + 4)  # 44/70
LIVE_AST = (2 + 10 + 0 + 1) / (3 + 20 + 1 + 2)                # 1/2
# multi-turn = unweighted mean of its four (count-weighted would be 5/10)
MULTI_TURN = (1 / 2 + 0 / 3 + 3 / 4 + 1 / 1) / 4               # 9/16
OVERALL = (LIVE + NON_LIVE + MULTI_TURN) / 3


def test_summarize_matches_the_official_formulas_with_uneven_counts():
    s = summarize(COUNTS)
    assert s["non_live_simple"] == pytest.approx(5 / 12)
    assert s["non_live"] == pytest.approx(13 / 30) == pytest.approx(NON_LIVE)
    assert s["non_live_ast"] == pytest.approx(NON_LIVE_AST)
    assert s["live"] == pytest.approx(44 / 70) == pytest.approx(LIVE)
    assert s["live_ast"] == pytest.approx(LIVE_AST)
    assert s["multi_turn"] == pytest.approx(9 / 16) == pytest.approx(MULTI_TURN)
    assert s["overall"] == pytest.approx(OVERALL)
    assert s["relevance"] == pytest.approx(1 / 4)
    assert s["irrelevance"] == pytest.approx((3 / 10 + 30 / 40) / 2)
    assert s["categories"]["multiple"] == {"accuracy": 1 / 5, "correct": 1, "total": 5, "scored": True}


def test_an_unscored_category_counts_as_zero_with_its_dataset_size():
    counts = {c: v for c, v in COUNTS.items() if c not in ("live_relevance", "javascript")}
    s = summarize(counts, {"live_relevance": 4, "javascript": 1})
    assert s["live"] == pytest.approx((2 + 10 + 0 + 1 + 30 + 0) / 70)
    assert s["non_live_simple"] == pytest.approx((3 / 4 + 1 / 2 + 0) / 3)
    assert s["categories"]["live_relevance"] == {"accuracy": 0.0, "correct": 0, "total": 4, "scored": False}


def test_format_summary_prints_the_aggregates_and_na():
    counts = {c: v for c, v in COUNTS.items() if c != "live_relevance"}
    table = format_summary(summarize(counts, {"live_relevance": 4}))
    lines = [" ".join(line.split()) for line in table.splitlines()]
    assert "Overall Acc 53.67%" in lines  # (43/70 + 13/30 + 9/16) / 3 = 0.53671
    assert "Non-Live Overall Acc 43.33%" in lines
    assert "Live Overall Acc 61.43%" in lines  # 43/70
    assert "Multi Turn Overall Acc 56.25%" in lines
    assert "Live Simple AST 66.67% 2/3" in lines
    assert "Live Relevance Detection N/A" in lines


def test_an_aggregate_of_no_scored_category_is_na_not_zero():
    # Only non-live categories run (a --limit run): live and multi-turn have nothing to average.
    table = format_summary(summarize({"simple": (1, 2), "multiple": (1, 1)}))
    lines = {label: score for label, score, *_ in (re.split(r"\s{2,}", line.strip()) for line in table.splitlines())}
    assert lines["Live Overall Acc"] == lines["Live AST Summary"] == "N/A"
    assert lines["Multi Turn Overall Acc"] == "N/A"
    assert lines["Non-Live Overall Acc"] != "N/A" and lines["Overall Acc"] != "N/A"
    assert lines["Irrelevance Detection"] == "N/A"
    assert not re.search(r"\s0\.00%", table)
