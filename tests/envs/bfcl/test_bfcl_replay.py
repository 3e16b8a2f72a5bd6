"""Ground-truth replay: every entry with a ground truth scores 1.0 except the committed known failures."""
import json
from pathlib import Path

import pytest

from envs.bfcl.data import CATEGORIES, MULTI_TURN, SINGLE_TURN, load_entries
from envs.bfcl.multi_turn import check_multi_turn
from envs.bfcl.replay import ground_truth_output
from envs.bfcl.scoring import score_entry
from envs.data import has_data

pytestmark = pytest.mark.skipif(not has_data("bfcl_v3"), reason="BFCL-v3 data not found; set LOPD_DATA_DIR")
KNOWN = json.loads((Path(__file__).resolve().parents[3] / "envs/bfcl/known_gt_failures.json").read_text())


def _failures(categories, fmt, limit=None):
    failed, scored = set(), 0
    for cat in categories:
        for e in load_entries(cat)[:limit]:
            if e.answer is None:
                continue
            scored += 1
            if not score_entry(e, ground_truth_output(e, fmt), fmt).valid:
                failed.add(e.id)
    return failed, scored


def test_all_categories_load_4441_entries():
    assert sum(len(load_entries(c)) for c in CATEGORIES) == 4441
    assert len(CATEGORIES) == 17


@pytest.mark.parametrize("fmt", ["prompt", "fc"])
def test_single_turn_replay_fails_exactly_the_known_set(fmt):
    failed, scored = _failures(SINGLE_TURN, fmt)
    assert scored == 2501
    assert failed == set(KNOWN[fmt]), sorted(failed ^ set(KNOWN[fmt]))


def test_multi_turn_replay_of_the_ground_truth_strings():
    for cat in MULTI_TURN:
        for e in load_entries(cat)[:25]:
            assert check_multi_turn([[list(t)] if t else [] for t in e.answer], e).valid, e.id


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["prompt", "fc"])
def test_multi_turn_replay_all_entries(fmt):
    failed, scored = _failures(MULTI_TURN, fmt)
    assert scored == 800
    assert failed == {i for i in KNOWN[fmt] if i.startswith("multi_turn")}


@pytest.mark.slow
def test_multi_turn_raw_ground_truth_strings_all_entries():
    for cat in MULTI_TURN:
        for e in load_entries(cat):
            assert check_multi_turn([[list(t)] if t else [] for t in e.answer], e).valid, e.id


def test_known_failures_have_reasons():
    for fmt in ("prompt", "fc"):
        assert KNOWN[fmt] and all(isinstance(r, str) and len(r) > 20 for r in KNOWN[fmt].values())
