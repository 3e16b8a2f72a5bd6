"""LiveCodeBench loading: staged data, encoded private tests (safely), releases and date windows."""

import base64
import json
import os
import pickle
import zlib
from datetime import datetime

import pytest
from lcb_records import SUM_ROW, TWO_SUM_ROW, encode_private, row, stdin_test

from envs.data import has_data, require_data
from envs.livecodebench.data import decode_private_tests, load_problems, release_files

needs_lcb = pytest.mark.skipif(
    not has_data("livecodebench"), reason="LiveCodeBench data not found; set LOPD_DATA_DIR"
)


@needs_lcb
def test_staged_public_test_file():
    probs = load_problems()
    assert len(probs) == 1054 and all(p.public_only for p in probs)
    lc = [p for p in probs if p.platform == "leetcode"]
    assert len(lc) == 444 and all(p.func_name for p in lc) and all(p.tests for p in probs)
    assert all(t.testtype == "functional" for p in lc for t in p.tests)


@needs_lcb
def test_fixture_private_tests_are_decoded():
    p = load_problems(require_data("livecodebench", "fixtures", "lcb_codegen_lite_sample_1873_A.jsonl"))[0]
    assert p.question_id == "1873_A" and not p.public_only
    assert len(p.public_tests) == 1 and len(p.private_tests) == 4 and p.func_name is None


def test_own_records_roundtrip(own_file):
    s, t = load_problems(own_file)
    assert (s.question_id, len(s.tests), s.func_name) == ("own_sum", 3, None)
    assert (t.question_id, len(t.tests), t.func_name) == ("own_twosum", 3, "twoSum")
    assert t.evaluation_sample()["inputs"][1] == "[3, 2, 4]\n6" and not t.public_only


def test_hostile_pickle_is_refused_without_running(tmp_path):
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    blob = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
    with pytest.raises(ValueError, match="refusing"):
        decode_private_tests(blob)
    assert not marker.exists()
    with pytest.raises(ValueError, match="JSON string"):
        decode_private_tests(base64.b64encode(zlib.compress(pickle.dumps([1, 2]))).decode())
    with pytest.raises(ValueError):
        decode_private_tests("not base64 at all!")
    assert decode_private_tests(encode_private([stdin_test("1", "2")])) == [stdin_test("1", "2")]


def test_releases_are_cumulative_and_dates_filter(tmp_path):
    for i, name in enumerate(["test.jsonl", "test2.jsonl", "test3.jsonl"]):
        r = row(f"q{i}", "c", [stdin_test("1", "1")], [], date=f"2024-0{i + 1}-10T00:00:00", encode=False)
        (tmp_path / name).write_text(json.dumps(r) + "\n")
    ids = lambda **kw: [p.question_id for p in load_problems(tmp_path, **kw)]  # noqa: E731
    assert ids(release="release_v1") == ["q0"]
    assert ids(release="release_v2") == ["q0", "q1"]
    assert ids(release="v3") == ["q2"]
    assert ids(release="release_latest") == ["q0", "q1", "q2"]
    assert ids(release="release_latest", start_date="2024-02-01") == ["q1", "q2"]
    assert ids(release="release_latest", end_date=datetime(2024, 2, 10)) == ["q0", "q1"]
    assert release_files("release_v6")[-1] == "test6.jsonl"
    with pytest.raises(ValueError, match="unknown release"):
        load_problems(tmp_path, release="release_v9")
    with pytest.raises(ValueError, match="directory"):
        load_problems(tmp_path / "test.jsonl", release="release_v1")


def test_malformed_rows_name_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(SUM_ROW) + "\n" + json.dumps({"question_id": "x"}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        load_problems(path)
    path.write_text(json.dumps(dict(TWO_SUM_ROW, public_test_cases='[{"input": 1}]')) + "\n")
    with pytest.raises(ValueError, match="string input"):
        load_problems(path)
