"""benchmarks/bench_server.py at tiny sizes against the session's real vLLM server (skips without
`make vllm`): both cases run on both sides and report what RESULTS.md tabulates."""

import json
import math

import pytest

from benchmarks import bench_server


def test_help_parses(capsys):
    with pytest.raises(SystemExit) as e:
        bench_server.main(["--help"])
    assert e.value.code == 0 and "--url" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")  # the script sets 1 torch thread
def test_both_cases_run_on_both_sides(vllm_server, tmp_path):
    from vllm_server import restore_base

    pool, base = vllm_server
    out = tmp_path / "bench.json"
    # Attached (--url): the grpo step syncs the server's weights, and the script puts the base back.
    try:
        assert bench_server.main(["--url", pool.servers[0].url, "--repeats", "1", "--no-warmup", "--episodes", "2",
                                  "--rollouts-per-step", "4", "--max-new-tokens", "12", "--max-turns", "2",
                                  "--work", str(tmp_path / "work"), "--json", str(out)]) == 0
    except BaseException:
        restore_base(pool, base)  # the session's other tests need the base
        raise
    res = json.loads(out.read_text())
    assert res["server_version"] and res["torch_threads"] == 1
    roll, step = res["cases"]["rollout"], res["cases"]["grpo_step"]
    for side in ("hf", "vllm"):
        assert roll["median"][side]["tokens"] > 0 and roll["median"][side]["tokens_per_s"] > 0
        assert len(roll["all"][side]) == 1
        m = step["median"][side]
        assert m["step_s"] >= m["rollout_s"] + m["update_s"] > 0 and m["tokens"] > 0
    assert step["median"]["vllm"]["sync_s"] > step["median"]["vllm"]["sync_write_s"] > 0
    assert math.isfinite(roll["paired_ratio_vllm_over_hf"]["tokens_per_s"])
    assert "sync_s" not in step["paired_ratio_vllm_over_hf"]
    # The server serves the base again: its greedy decode is the pinned model's.
    from harness.engines import HFEngine, SamplingParams
    from vllm_server import pinned_model

    model, tok = pinned_model()
    p = tok.encode("the shop sells", add_special_tokens=False)
    sp = SamplingParams(temperature=0.0, max_new_tokens=16)
    assert pool.engines[0].generate([p], sp)[0].token_ids == HFEngine(model, tok).generate([p], sp)[0].token_ids
