"""benchmarks/compare.py: the dry run, and the whole protocol end to end on a small setup."""

import json
import math
import sys
from pathlib import Path

import pytest

from harness.experiments.comparison import LEARNERS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import compare  # noqa: E402


def test_dry_run_lists_every_run_and_counts_the_episodes(capsys):
    assert compare.main(["--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "tune (16 runs, 60 validation tasks x 6 points each)" in text
    assert "test (23 runs, 120 test tasks x 11 points each)" in text  # 4 learners x 5 seeds + the ablation x 3
    assert "lopd seed 5" in text and "lopd-frozen seed 3" in text and "lopd-frozen seed 4" not in text
    # 39 runs x 640; 16 x 60 x 6 + 23 x 120 x 11
    assert "training episodes 24,960; evaluation episodes 36,120" in text


SMALL = ["base.n_train=60", "base.n_eval=12", "base.n_plain=16", "base.n_referenced=8", "base.n_copy_drills=16",
         "base.mixed_drills=0", "base.vocab_size=400", "base.pretrain.epochs=1", "base.pretrain.batch_tokens=4096",
         "base.pretrain.warmup_steps=1", "generations=8", "rollouts_per_step=8", "eval_every=8", "eval_tasks=4",
         "val_tasks=3", "max_new_tokens=24", "max_turns=3", "bank_tasks=8", "min_bank=8", "embedder=hashing",
         "coldstart_steps=1", "coldstart_batch=2", "coldstart_tasks=8", "progress=false", "jobs=1"]


# The small base never succeeds, so the bank (and the cold start) need scripted-expert episodes here
# (min_bank=8); the report counts them apart from the generated episodes.
@pytest.mark.slow
def test_compare_runs_the_whole_protocol_and_writes_the_report(tmp_path, monkeypatch):
    monkeypatch.setenv("LOPD_CACHE_DIR", str(tmp_path / "cache"))
    one = "[[optim.lr=1e-3]]"  # the choice among several is test_comparison's; one each keeps this fast
    sets = [f"demo.{s}" for s in SMALL] + [f"{n}.sweep={one}" for n in LEARNERS] + [
        "seeds=[1]", "ablation_seeds=[1]", "n_boot=200"]
    out = tmp_path / "cmp"
    proto = ROOT / "benchmarks" / "protocols" / "equal_data.yaml"
    assert compare.main(["--protocol", str(proto), "--out", str(out), "--set", *sets]) == 0
    tuning = json.loads((out / "tuning.json").read_text())
    assert tuning["chosen"] == {n: 0 for n in LEARNERS} and all(len(tuning["table"][n]) == 1 for n in LEARNERS)
    assert [p[0] for p in tuning["table"]["lopd"][0]["curve"]] == [0, 8]
    tuning_md = (out / "tuning.md").read_text()
    assert "validation AUC" in tuning_md and "Composer diagnostics" in tuning_md and "| lopd-c0 (" in tuning_md
    assert all((out / f).stat().st_size > 1000 for f in ("tuning.png", "tuning_composer.png"))
    # tuning evaluated the validation tasks only, the test stage the test tasks only
    val = {json.loads(x)["task_id"] for x in open(out / "tune" / "runs" / "grpo-c0-s0" / "traces.jsonl")
           if '"eval"' in x and json.loads(x)["meta"].get("phase") == "eval"}
    test = {json.loads(x)["task_id"] for x in open(out / "test" / "runs" / "grpo-s1" / "traces.jsonl")
            if json.loads(x)["meta"].get("phase") == "eval"}
    assert len(val) == 3 and len(test) == 4 and not val & test
    a = json.loads((out / "report.json").read_text())
    assert list(a["specs"]) == ["grpo", "opsd", "sdpo", "lopd", "lopd-frozen"]
    for v in a["specs"].values():
        assert v["seeds"] == [1] and [c["generations"] for c in v["curve"]] == [0, 8]
        assert all(c["lo"] <= c["mean"] <= c["hi"] for c in v["curve"])
    assert a["reproduce"].startswith("python benchmarks/compare.py --protocol "
                                     f"benchmarks/protocols/equal_data.yaml --out {out} --set ")
    assert a["specs"]["lopd"]["budget"] == {"rl": 8, "bank": 8, "coldstart": 8, "expert": 8, "total": 24}
    assert a["specs"]["grpo"]["budget"]["total"] == 8
    assert a["specs"]["lopd"]["composer"]["anchor"] and a["specs"]["lopd-frozen"]["composer"]["anchor"]
    probe = a["specs"]["lopd"]["teacher_probe"]  # the teacher as a policy on the validation tasks
    assert probe["split"] == "val" and probe["tasks"] == 3
    assert probe["advantage_end"] == pytest.approx(probe["teacher_end"] - probe["student_end"], abs=1e-3)
    assert set(a["paired"]) == {"grpo", "opsd", "sdpo", "lopd-frozen"}
    assert all(0.0 <= p["final"]["p"] <= 1.0 and math.isfinite(p["auc"]["diff"]) for p in a["paired"].values())
    text = (out / "results.md").read_text()
    assert "bootstrap" in text and "validation AUC" in text and "Composer diagnostics" in text
    assert all((out / f).stat().st_size > 1000 for f in ("curves.png", "composer.png", "tuning.png"))
    # a second command reuses every run
    assert compare.main(["--protocol", str(proto), "--out", str(out), "--set", *sets, "--stage", "test"]) == 0
    # the report stage trains nothing: an unfinished run is named and left out, the rest reported
    (out / "test" / "runs" / "sdpo-s1" / "metrics.jsonl").write_text("")
    assert compare.main(["--protocol", str(proto), "--out", str(out), "--set", *sets, "--stage", "report"]) == 0
    a = json.loads((out / "report.json").read_text())
    assert "--stage" not in a["reproduce"] and "--stage report" in a["command"]
    assert a["missing"] == ["sdpo-s1"] and "sdpo" not in a["specs"] and "grpo" in a["specs"]
    assert "Partial: 1 of the protocol's test runs" in (out / "results.md").read_text()
    assert not (out / "test" / "runs" / "sdpo-s1" / "metrics.jsonl").read_text()

