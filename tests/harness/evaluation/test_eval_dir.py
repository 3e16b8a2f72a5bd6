"""harness/evaluation/eval_dir.py: an eval folder's torn last line is repaired, never kept half-written."""

from __future__ import annotations

import json

from harness.evaluation.eval_dir import cut_torn_tail


def test_cut_torn_tail(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n{"b": 2}')  # complete line without its newline: kept
    assert "terminated" in cut_torn_tail(p, json.loads) and p.read_text() == '{"a": 1}\n{"b": 2}\n'
    p.write_text('{"a": 1}\n{"b": ')
    assert "cut off" in cut_torn_tail(p, json.loads) and p.read_text() == '{"a": 1}\n'
    p.write_text('{"b": ')  # the only line is torn
    assert cut_torn_tail(p, json.loads) and p.read_text() == ""
    assert cut_torn_tail(p, json.loads) is None
