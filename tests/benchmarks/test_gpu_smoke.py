"""benchmarks/gpu_smoke.py: its options parse, and its vLLM checks pass against the session's real CPU
vLLM server on the pinned base (skips without `make vllm`). The SGLang checks need a GPU."""

import json

import pytest

from benchmarks import gpu_smoke
from vllm_server import PINNED


def test_help_names_both_servers(capsys):
    with pytest.raises(SystemExit) as e:
        gpu_smoke.main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "{sglang,vllm}" in out and "--perturb" in out


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
def test_vllm_checks_pass_on_the_cpu_server(vllm_server, tmp_path):
    from vllm_server import restore_base

    pool, base = vllm_server
    out = tmp_path / "smoke.json"
    gpu_smoke.RESULTS.clear()
    try:
        rc = gpu_smoke.main(["--server", "vllm", "--model", str(PINNED), "--url", pool.servers[0].url,
                             "--work", str(tmp_path / "work"), "--out", str(out)])
    finally:
        restore_base(pool, base)  # the weight-update check restores too; the session's other tests need the base
    res = {r["check"]: r for r in json.loads(out.read_text())["results"]}
    assert rc == 0, res
    assert list(res) == ["server", "generate", "greedy_vs_hf", "top20_scores_vs_hf", "sampled_logprobs",
                         "prompt_embeds", "rollout", "weight_update", "weight_sync_in_memory"]
    assert all(r["status"] == "PASS" for r in res.values())
    assert res["greedy_vs_hf"]["criterion"] == "token for token" and res["greedy_vs_hf"]["equal"]
    assert res["prompt_embeds"]["scoring_under_overrides"].startswith("refused")
    for name in ("weight_update", "weight_sync_in_memory"):
        assert res[name]["scores_moved_by"] > 0.2 > res[name]["gap_to_perturbed_hf"], res[name]
    assert res["weight_sync_in_memory"]["backend"] == "gloo"


def test_the_device_check_runs_gpu_device_check_and_reports_its_verdict(tmp_path):
    """Without CUDA the memory check's script says so and exits 2: a FAIL naming it, not a crash."""
    import argparse

    gpu_smoke.RESULTS.clear()
    gpu_smoke.check_device(argparse.Namespace(work=str(tmp_path), device_timeout=120))
    (res,) = gpu_smoke.RESULTS
    assert res["check"] == "device_memory" and res["status"] == "FAIL", res
    assert "exited 2" in res["error"] and "no CUDA device" in res["error"]
