"""``lopd demo`` end to end on a reduced setup: a fresh cache (the base is built), then a cached rerun.

The base here is a small one (60 train tasks, 24 transcripts, one pretraining pass) so the whole
pipeline fits the test budget; ``lopd demo`` itself uses the project's base (BaseModelConfig()).
The test checks that the pipeline produced real, finite, non-trivial curves, not any ranking.
"""

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from harness.cli import main
from harness.experiments.demo import DemoConfig, RunSpec
from harness.experiments.demo_report import format_report, generations_to, mean_curve, summarize
from harness.experiments.demo_runs import complete, same_run

SMALL = [
    "base.n_train=60", "base.n_eval=12", "base.n_plain=16", "base.n_referenced=8", "base.n_copy_drills=16", "base.mixed_drills=0",
    "base.vocab_size=400",
    "base.pretrain.epochs=1", "base.pretrain.batch_tokens=4096", "base.pretrain.warmup_steps=1",
    "generations=16", "rollouts_per_step=8", "eval_every=8", "eval_tasks=4", "max_new_tokens=32", "max_turns=3",
    "bank_tasks=8", "min_bank=8", "embedder=hashing", "coldstart_steps=2", "coldstart_batch=2",
    "coldstart_tasks=8",
]


def test_mean_curve_keeps_shared_points_and_spread():
    c = mean_curve([[(0, 0.0), (8, 0.5), (16, 1.0)], [(0, 0.2), (8, 0.3)]])
    assert [p["generations"] for p in c] == [0, 8]
    assert c[0]["mean"] == pytest.approx(0.1) and c[1]["min"] == 0.3 and c[1]["max"] == 0.5
    assert c[1]["std"] == pytest.approx(math.sqrt(0.02), abs=1e-5)
    assert mean_curve([]) == []


def test_generations_to_threshold_and_report_tables():
    runs = [{"label": "grpo", "seed": 0, "curve": [(0, 0.1), (32, 0.2), (64, 0.4)], "behaviour": {}},
            {"label": "lopd", "seed": 0, "curve": [(0, 0.1), (32, 0.45), (64, 0.5)], "behaviour": {}}]
    rep = summarize(runs, [RunSpec("grpo", "grpo"), RunSpec("lopd", "lopd")], None)
    assert rep["threshold"] == 0.4 and rep["specs"]["lopd"]["generations_to_threshold"] == 32
    assert rep["specs"]["grpo"]["generations_to_threshold"] == 64
    assert generations_to(rep["specs"]["grpo"]["curve"], 0.9) is None
    text = format_report(rep)
    assert "@32" in text and "50%" in text  # lopd reaches GRPO's final reward at half the budget


@pytest.mark.slow
def test_demo_from_a_fresh_cache_then_cached(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LOPD_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), *SMALL]) == 0
    printed = capsys.readouterr().out
    rep = json.loads((out / "report.json").read_text())
    assert not rep["base"]["cached"] and not rep["bank"]["cached"]
    assert rep["bank"]["entries"] >= 8
    assert (out / "curves.png").stat().st_size > 1000 and (out / "report.txt").is_file()
    assert "Held-out reward" in printed and "Generations to reach" in printed and "Behaviour" in printed
    losses = {}
    for label in ("grpo", "lopd"):
        curve = rep["specs"][label]["curve"]
        assert [p["generations"] for p in curve] == [0, 8, 16]  # several eval points, equal budget
        assert all(math.isfinite(p["mean"]) and 0.0 <= p["mean"] <= 1.0 for p in curve)
        run = rep["runs"][[r["label"] for r in rep["runs"]].index(label)]
        metrics = [json.loads(x) for x in open(f"{run['run_dir']}/metrics.jsonl")]
        train = [m for m in metrics if "train/reward" in m]
        evals = [m for m in metrics if "eval/reward" in m]
        assert [m["generations"] for m in train] == [8, 16]
        assert all(math.isfinite(v) for m in metrics for v in m.values() if isinstance(v, float))
        losses[label] = [m["train/loss"] for m in train]
    # non-trivial: LOPD's distillation loss is live whatever the reward (GRPO's is 0 while no rollout
    # of a group scores differently), so its loss curve moves and its student's weights change. The
    # small base here never scores and always answers the same way, so the reward curves are 0 and
    # the eval behaviour flat: this test checks the pipeline, not learning.
    assert all(v > 0 for v in losses["lopd"]) and len(set(losses["lopd"])) > 1
    base = load_file(str(Path(rep["base"]["path"]) / "model.safetensors"))
    lopd_dir = Path(rep["runs"][[r["label"] for r in rep["runs"]].index("lopd")]["run_dir"])
    final = {}
    for f in sorted(lopd_dir.glob("checkpoints/*/student/*.safetensors")):
        final.update(load_file(str(f)))
    shared = [k for k in final if k in base]
    assert shared and any(not torch.equal(final[k], base[k]) for k in shared)
    assert rep["coldstart"]["composers"]["lopd"]["cached"] is False
    assert rep["coldstart"]["traces"]["source"] == "referenced" and rep["coldstart"]["traces"]["episodes"] == 8

    # second run: everything comes from the cache, the finished runs are reused (progress bars off
    # changes log.progress, which is no part of a run's identity)
    assert main(["demo", "--out", str(out), *SMALL, "progress=false"]) == 0
    rep2 = json.loads((out / "report.json").read_text())
    assert rep2["base"]["cached"] and rep2["bank"]["cached"] and rep2["coldstart"]["composers"]["lopd"]["cached"]
    assert rep2["coldstart"]["traces"]["cached"]
    assert all(r["reused"] for r in rep2["runs"])
    assert rep2["specs"] == rep["specs"]

    # a finished run whose logs were lost is retrained, not reported as an empty curve
    grpo_dir = Path(rep["runs"][[r["label"] for r in rep["runs"]].index("grpo")]["run_dir"])
    (grpo_dir / "metrics.jsonl").write_text("")
    assert main(["demo", "--out", str(out), *SMALL, "progress=false"]) == 0
    rep3 = json.loads((out / "report.json").read_text())
    assert [r["reused"] for r in rep3["runs"] if r["label"] == "grpo"] == [False]
    assert [p["generations"] for p in rep3["specs"]["grpo"]["curve"]] == [0, 8, 16]

    # the paper's cold-start pairs (the bank's own episodes): another composer, so LOPD retrains, GRPO not
    assert main(["demo", "--out", str(out), *SMALL, "progress=false", "coldstart_source=base"]) == 0
    rep4 = json.loads((out / "report.json").read_text())
    assert rep4["coldstart"]["traces"] == {"source": "base"}
    assert rep4["coldstart"]["composers"]["lopd"]["path"] != rep["coldstart"]["composers"]["lopd"]["path"]
    assert {r["label"]: r["reused"] for r in rep4["runs"]} == {"grpo": True, "lopd": False}

    # an output folder assembled from links to finished runs reuses them (a run's folder is no part of
    # its identity); a link to a run of another spec is dropped and retrained there, the run it named kept
    linked = tmp_path / "linked"
    (linked / "runs").mkdir(parents=True)
    for r in rep4["runs"]:
        (linked / "runs" / Path(r["run_dir"]).name).symlink_to(r["run_dir"])
    assert main(["demo", "--out", str(linked), *SMALL, "progress=false"]) == 0
    rep5 = json.loads((linked / "report.json").read_text())
    assert {r["label"]: r["reused"] for r in rep5["runs"]} == {"grpo": True, "lopd": False}
    lopd5 = Path(rep5["runs"][[r["label"] for r in rep5["runs"]].index("lopd")]["run_dir"])
    assert not lopd5.is_symlink() and lopd5.is_dir()
    assert (out / "runs" / lopd5.name / "metrics.jsonl").is_file()  # coldstart_source=base's run, untouched


def test_same_run_ignores_progress_bars_and_the_folder_only():
    want = {"version": 1, "overrides": ["run_dir=/a/runs/x-s0", "seed=0", "log.progress=true", "optim.lr=0.001"]}
    assert same_run({"version": 1, "overrides": ["run_dir=/b/runs/x-s0", "seed=0", "log.progress=false",
                                                 "optim.lr=0.001"]}, want)
    assert not same_run({"version": 1, "overrides": ["seed=0", "log.progress=true", "optim.lr=0.0003"]}, want)
    assert not same_run({"version": 0, "overrides": want["overrides"]}, want)
    assert not same_run(None, want) and not same_run(["seed=0"], want)


def test_same_run_takes_a_built_base_by_its_recorded_key_not_its_folder(tmp_path, built_base):
    """A pinned base copied into a cache folder named by newer code is the same weights: its runs resume."""
    from harness.experiments.demo_runs import wanted

    old, moved, other = built_base("1m-aaa", "k1"), built_base("1m-bbb", "k1"), built_base("1m-ccc", "k2")
    saved = wanted(["learner=grpo", f"model.path={old}"])
    assert same_run(saved, wanted(["learner=grpo", f"model.path={moved}"]))
    assert not same_run(saved, wanted(["learner=grpo", f"model.path={other}"]))
    assert not same_run(saved, wanted(["learner=grpo", f"model.path={tmp_path / 'no-base'}"]))


def test_same_run_finds_the_cached_bank_and_cold_start_wherever_the_cache_lies():
    """A run resumed on a machine whose cache is elsewhere (a committed ablation snapshot) is the same run;
    another bank or cold start (another key) is not."""
    from harness.experiments.demo_runs import wanted

    def ov(cache: str, bank: str = "f8606585bae788d3", cs: str = "8c22dd7fd04e030a") -> list[str]:
        return ["learner=lopd", f"bank.path={cache}/demo/bank-{bank}/bank",
                f"lopd.composer_init={cache}/demo/coldstart-{cs}/composer.pt"]

    saved = wanted(ov("/root/.cache/lopd"))
    assert same_run(saved, wanted(ov("/home/ci/cache")))
    assert not same_run(saved, wanted(ov("/home/ci/cache", bank="0000000000000000")))
    assert not same_run(saved, wanted(ov("/root/.cache/lopd", cs="1111111111111111")))


def test_same_run_compares_the_resolved_configs_on_the_saved_keys():
    from harness.experiments.demo_runs import wanted

    ov = ["learner=grpo", "run_dir=/a", "optim.lr=0.001"]
    saved = wanted(ov)
    assert saved["config"]["optim"]["lr"] == 0.001 and "run_dir" not in saved["config"]
    assert same_run(saved, wanted([*ov[:1], "run_dir=/b", *ov[2:]]))
    edited = wanted(ov)
    edited["config"]["grpo"]["clip_high"] = 0.28  # as if the packaged file changed under the same overrides
    assert not same_run(saved, edited)
    newer = wanted(ov)
    newer["config"]["grpo"]["a_field_added_since"] = 1  # code grew a field: the saved run is still that run
    assert same_run(saved, newer)


def test_the_coldstart_key_reads_the_composer_settings_and_not_the_run_seed():
    from harness.config import load_config
    from harness.prepare.stages import coldstart_key
    from harness.training.train_config import TrainConfig

    def key(*ov: str, cfg: DemoConfig = DemoConfig()) -> str:
        train_cfg = load_config(TrainConfig, None, ["learner=lopd", *ov])
        return coldstart_key(cfg, train_cfg, Path("bank"), [Path("t")])

    assert key("seed=1") == key("seed=2")
    assert len({key(), key("lopd.composer_seed=1"), key("lopd.coldstart.grad_clip=1.0"),
                key(cfg=DemoConfig(coldstart_lr=1e-3))}) == 4


def test_demo_config_rejects_bad_specs(tmp_path):
    from harness.experiments.demo import run_pipeline

    with pytest.raises(ValueError, match="unique"):
        run_pipeline(DemoConfig(out=str(tmp_path)), [RunSpec("a", "grpo"), RunSpec("a", "lopd")])


@pytest.mark.slow  # the worker imports torch
def test_pool_workers_exit_with_their_parent():
    """A killed compare run must not leave workers training into run folders (see exit_with_parent)."""
    import subprocess
    import sys
    import time

    worker = ("import sys, time; from harness.experiments.demo_runs import exit_with_parent; "
              "exit_with_parent(int(sys.argv[1]), every=0.05); time.sleep(60)")
    parent = ("import subprocess, sys, os; "
              f"p = subprocess.Popen([sys.executable, '-c', {worker!r}, str(os.getpid())]); print(p.pid)")
    out = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, check=True, timeout=60)
    pid = int(out.stdout)

    def alive() -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 20
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive()


def test_a_run_is_complete_when_its_curve_reaches_the_whole_steps_of_the_budget(tmp_path):
    assert not complete(tmp_path, DemoConfig())  # no metrics at all
    lines = [json.dumps({"generations": g, "eval/reward": 0.1}) for g in (0, 32, 96)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert complete(tmp_path, DemoConfig(generations=100, rollouts_per_step=32))  # 3 whole steps
    assert not complete(tmp_path, DemoConfig(generations=128, rollouts_per_step=32))


def test_the_demo_prints_the_shipped_result_with_intervals_and_what_the_live_run_cannot_show(tmp_path):
    from harness.experiments.demo_report import live_caveat, shipped_summary

    assert "No shipped full-budget result" in shipped_summary(tmp_path / "missing.json")
    curve = [{"generations": 0, "mean": 0.3, "lo": 0.28, "hi": 0.32}, {"generations": 640, "mean": 0.61, "lo": 0.58, "hi": 0.64}]
    spec = {"curve": curve, "to_threshold": {"point": 320, "lo": 256, "hi": None},
            "budget": {"rl": 640, "bank": 600, "coldstart": 600, "total": 1840}}
    analysis = {"config": {"generations": 640}, "threshold": {"learner": "grpo", "value": 0.55},
                "protocol": {"name": "equal-data", "seeds": [1, 2, 3, 4, 5]}, "test_tasks": 120,
                "command": "python benchmarks/compare.py --out X",
                "specs": {"grpo": {**spec, "to_threshold": {"point": None, "lo": None, "hi": None},
                                   "budget": {"rl": 640, "bank": 0, "coldstart": 0, "total": 640}},
                          "lopd": spec},
                "paired": {"grpo": {"final": {"diff": 0.05, "lo": 0.01, "hi": 0.09, "p": 0.02}}}}
    path = tmp_path / "report.json"
    path.write_text(json.dumps(analysis))
    text = shipped_summary(path)
    assert "5 seeds, 120 test tasks, 640 generations" in text and "python benchmarks/compare.py --out X" in text
    assert "0.610 [0.580, 0.640]" in text and "320 [256, n.r.]" in text and "1840 (640 + 600 + 600)" in text
    assert "Reproduce (every stage): `python benchmarks/compare.py --out X`" in text
    assert "not within 640" in text and "paired bootstrap: grpo +0.050 [+0.010, +0.090] (p = 0.020)." in text
    analysis["missing"] = ["lopd-s5"]
    analysis["specs"]["lopd"]["seeds"] = [1, 2, 3, 4]
    path.write_text(json.dumps(analysis))
    assert "PARTIAL (1 of the protocol's runs missing: lopd-s5). 4-5 seeds" in shipped_summary(path)
    analysis.update(missing=["grpo-s1", "lopd-s1"], specs={}, paired={})  # nothing finished yet: no crash
    path.write_text(json.dumps(analysis))
    assert "PARTIAL (2 of the protocol's runs missing: grpo-s1, lopd-s1). 0 seeds" in shipped_summary(path)
    caveat = live_caveat({"config": {"eval_tasks": 30, "seeds": [0], "generations": 96}})
    assert "0.033" in caveat and "cannot rank" in caveat


def test_the_shipped_comparison_is_found_where_the_demo_looks():
    from harness.experiments.demo_report import SHIPPED

    assert SHIPPED.is_file(), f"lopd demo would print no shipped result: {SHIPPED}"


def test_an_interrupted_run_is_resumed_and_a_finished_one_that_lost_its_logs_retrained(tmp_path):
    """The spec is written before training and the summary after: a folder with the spec alone was
    interrupted (kept: the trainer resumes from its checkpoint); one with a summary but no complete curve
    lost its logs, and one of another spec is stale (both deleted and retrained)."""
    from harness.experiments.demo_runs import _save_spec, runs_to_train, wanted

    cfg = DemoConfig(generations=16, rollouts_per_step=8)
    ov = ["learner=grpo", "generations=16", "rollouts_per_step=8"]
    want, other = wanted(ov), wanted([*ov, "optim.lr=1e-3"])
    folders = {}
    for name, spec, summary in (("interrupted", want, {}), ("lost", want, {"steps": 2}), ("stale", other, {})):
        folders[name] = d = tmp_path / name
        d.mkdir()
        (d / "checkpoint-marker").write_text("x")
        _save_spec(d, spec, summary)
    todo = runs_to_train(cfg, [(RunSpec(n, "grpo"), 0, d, ov) for n, d in folders.items()])
    assert [t[2].name for t in todo] == ["interrupted", "lost", "stale"]
    assert (folders["interrupted"] / "checkpoint-marker").exists()
    assert not folders["lost"].exists() and not folders["stale"].exists()
