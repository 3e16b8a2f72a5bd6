"""``lopd eval``: outputs, consistency, resume after interruption, official summaries, SGLang concurrency."""
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers lopd/* ids)
from envs.data import has_data
from envs.examples.shop import ShopEnv
from envs.protocol import render_tool_call
from envs.trace import read_traces
from harness.cli import main
from harness.engines import HFEngine, SGLangEngine
from harness.engines.server import EngineConfig
from harness.evaluation.summary import format_summary, summarize_verdicts
from harness.evaluation.eval_dir import read_progress, verdict_of
from harness.evaluation.evaluate import EvalRunConfig, pair_seed, run_eval
from harness.models import save_pretrained


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def engine(model_dir):
    """One loaded HF engine for the module (loading is cheap; this keeps runs comparable)."""
    return HFEngine.from_pretrained(model_dir)


def cfg(model_dir, out, **kw):
    base = {"envs": ["lopd/shop-v0"], "model": model_dir, "out": str(out), "max_new_tokens": 8, "max_turns": 2,
            "temperature": 1.0, "top_p": 1.0, "top_k": -1}
    return EvalRunConfig(**{**base, **kw})


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def check_consistent(out, expected_keys):
    """Traces and verdicts agree, one each per expected (env, task, sample); summary recomputes."""
    eps = list(read_traces(out / "traces.jsonl"))
    keys = [(e.env_id, e.task_id, e.meta["sample"]) for e in eps]
    assert Counter(keys) == Counter(expected_keys)  # nothing repeated, nothing lost
    verdicts = lines(out / "verdicts.jsonl")
    assert len(verdicts) == len(eps)
    by_key = {(v["env"], v["task_id"], v["sample"]): v for v in verdicts}
    for ep in eps:
        v = by_key[(ep.env_id, ep.task_id, ep.meta["sample"])]
        assert v["reward"] == ep.reward and v["steps"] == len(ep.steps) and v["pass"] == (ep.reward >= 1.0)
        assert v == verdict_of(ep)
        assert ep.meta["run"] and ep.meta["model"] and "category" in ep.meta
    summary = json.loads((out / "summary.json").read_text())
    recomputed = json.loads(json.dumps(summarize_verdicts(verdicts)))
    for k in ("envs", "benchmarks", "episodes"):
        assert summary[k] == recomputed[k]
    for env_id, s in summary["envs"].items():
        mine = [v for v in verdicts if v["env"] == env_id]
        assert s["episodes"] == len(mine)
        assert s["mean_reward"] == pytest.approx(sum(v["reward"] for v in mine) / len(mine))
        assert s["pass_rate"] == pytest.approx(sum(v["pass"] for v in mine) / len(mine))
        assert s["mean_steps"] == pytest.approx(sum(v["steps"] for v in mine) / len(mine))
    return eps, verdicts, summary


SHOP_KEYS = [("lopd/shop-v0", t, k) for t in ("apples", "mix") for k in range(2)]


def test_outputs_exist_and_agree(model_dir, engine, tmp_path):
    res = run_eval(cfg(model_dir, tmp_path, n_samples=2), engine, engine.tokenizer, log=lambda s: None)
    assert (res.planned, res.skipped, res.ran, res.failed) == (4, 0, 4, [])
    eps, _, summary = check_consistent(tmp_path, SHOP_KEYS)
    assert all(e.prompt_token_ids and e.steps and e.steps[0].token_ids for e in eps)
    assert {e.meta["task_index"] for e in eps} == {0, 1}
    assert summary["envs"]["lopd/shop-v0"]["tasks"] == 2 and summary["benchmarks"] == {}
    assert json.loads((tmp_path / "run.json").read_text())["n_samples"] == 2
    # the same command again: nothing to do, nothing appended
    before = (tmp_path / "traces.jsonl").read_bytes()
    res = run_eval(cfg(model_dir, tmp_path, n_samples=2), engine, engine.tokenizer, log=lambda s: None)
    assert (res.skipped, res.ran) == (4, 0) and (tmp_path / "traces.jsonl").read_bytes() == before


def test_split_and_limit_select_tasks(model_dir, engine, tmp_path):
    res = run_eval(cfg(model_dir, tmp_path / "a", split="eval"), engine, engine.tokenizer, log=lambda s: None)
    assert [e.task_id for e in read_traces(tmp_path / "a" / "traces.jsonl")] == ["mix"] and res.ran == 1
    res = run_eval(cfg(model_dir, tmp_path / "b", limit=1), engine, engine.tokenizer, log=lambda s: None)
    assert [e.task_id for e in read_traces(tmp_path / "b" / "traces.jsonl")] == ["apples"]
    with pytest.raises(ValueError, match="no task in split 'nope'"):
        run_eval(cfg(model_dir, tmp_path / "c", split="nope"), engine, engine.tokenizer, log=lambda s: None)


def test_interrupt_then_resume_repeats_nothing_and_loses_nothing(model_dir, engine, tmp_path):
    # 1) a smaller run (--limit 1) ...
    run_eval(cfg(model_dir, tmp_path, n_samples=2, limit=1), engine, engine.tokenizer, log=lambda s: None)
    check_consistent(tmp_path, SHOP_KEYS[:2])

    # 2) ... then the full run, interrupted after its first saved episode (as Ctrl-C would) ...
    def interrupt(msg):
        if "episodes done" in msg:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        run_eval(cfg(model_dir, tmp_path, n_samples=2, batch_size=1), engine, engine.tokenizer, log=interrupt)
    assert len(lines(tmp_path / "traces.jsonl")) == 3

    # 3) ... killed mid-write: a torn trace line, and the last trace's verdict never written
    whole = (tmp_path / "traces.jsonl").read_text().splitlines()
    with open(tmp_path / "traces.jsonl", "a") as f:
        f.write(whole[-1][: len(whole[-1]) // 2])
    v = (tmp_path / "verdicts.jsonl").read_text().splitlines()
    (tmp_path / "verdicts.jsonl").write_text("\n".join(v[:-1]) + "\n" + v[-1][:20])

    notes = []
    res = run_eval(cfg(model_dir, tmp_path, n_samples=2), engine, engine.tokenizer, log=notes.append)
    assert (res.planned, res.skipped, res.ran) == (4, 3, 1)
    assert any("torn last line" in n and "traces.jsonl" in n for n in res.notes)
    assert any("rebuilt from their traces" in n for n in res.notes)
    check_consistent(tmp_path, SHOP_KEYS)
    assert read_progress(tmp_path).notes == []  # clean after the resume


def test_changed_settings_are_refused_on_resume(model_dir, engine, tmp_path):
    run_eval(cfg(model_dir, tmp_path, limit=1), engine, engine.tokenizer, log=lambda s: None)
    with pytest.raises(ValueError, match="temperature"):
        run_eval(cfg(model_dir, tmp_path, temperature=0.3), engine, engine.tokenizer, log=lambda s: None)


class BrokenShop(ShopEnv):
    """Reset of task 'mix' raises: the env breaks, not the model."""

    def setup(self, task):
        if task.task_id == "mix":
            raise RuntimeError("scenario cannot start")
        return super().setup(task)


def test_a_failing_episode_is_reported_not_written(model_dir, engine, tmp_path):
    if "lopd/evaltest-broken-v0" not in gym.registry:
        gym.register("lopd/evaltest-broken-v0", entry_point=BrokenShop)
    c = cfg(model_dir, tmp_path, envs=["lopd/evaltest-broken-v0"], n_samples=2)
    res = run_eval(c, engine, engine.tokenizer, log=lambda s: None)
    assert res.ran == 2 and sorted(k for k, _ in res.failed) == [("lopd/evaltest-broken-v0", "mix", 0),
                                                                  ("lopd/evaltest-broken-v0", "mix", 1)]
    assert all("scenario cannot start" in why for _, why in res.failed)
    check_consistent(tmp_path, [("lopd/evaltest-broken-v0", "apples", k) for k in range(2)])
    assert json.loads((tmp_path / "summary.json").read_text())["failed"] == 2


def test_cli_eval_then_stats(model_dir, tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["eval", "--env", "shop-v0", "--model", model_dir, "--out", str(out), "--n-samples", "2",
               "--max-new-tokens", "8", "--max-turns", "2", "--quiet", "--run-name", "base"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "lopd/shop-v0" in text and "mean_reward" in text
    check_consistent(out, SHOP_KEYS)
    assert main(["stats", str(out / "traces.jsonl"), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["group"] for r in rows} == {"base"}
    assert main(["eval", "--env", "nope-v0", "--model", model_dir, "--out", str(tmp_path / "x")]) == 2
    assert "unknown env" in capsys.readouterr().err
    assert main(["eval", "--env", "shop-v0", "--model", model_dir, "--out", str(tmp_path / "y"),
                 "--env-kwargs", "not json"]) == 2


@pytest.mark.slow
def test_eval_then_stats_compare_on_micro(model_dir, tmp_path, capsys):
    """Issue 9's 'done when', small: ``lopd eval`` of a tiny model and of the same model after one
    optimizer step on micro eval tasks, then ``lopd stats --compare`` of the two runs and its figure."""
    import torch

    from harness.models import load_model

    model, tok = load_model(model_dir)
    ids = tok("<tool_call>{}</tool_call>", return_tensors="pt").input_ids
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    model(ids, labels=ids).loss.backward()
    opt.step()
    stepped = save_pretrained(model.eval(), tok, tmp_path / "stepped")
    for name, path in (("base", model_dir), ("trained", stepped)):
        assert main(["eval", "--env", "micro-v0", "--env-kwargs", '{"n_train": 12, "n_eval": 6, "prompt": "compact"}',
                     "--split", "eval", "--limit", "4", "--model", str(path), "--out", str(tmp_path / name),
                     "--temperature", "0", "--max-new-tokens", "16", "--max-turns", "2", "--quiet"]) == 0
    capsys.readouterr()
    traces = [str(tmp_path / n / "traces.jsonl") for n in ("base", "trained")]
    assert main(["stats", *traces, "--compare", "base", "trained", "--plot", str(tmp_path / "figs")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["metric", "base", "trained", "delta", "delta_pct"]
    row = next(line.split() for line in lines if line.startswith("env_steps "))
    assert float(row[3]) == pytest.approx(float(row[2]) - float(row[1]), abs=1e-3)
    assert (tmp_path / "figs" / "distributions.png").stat().st_size > 10_000


# ---- SGLang: concurrency of our client side against a local stub ------------------------------

class ScriptedServer:
    """A local HTTP stub of SGLang's /generate that plays the shop tasks perfectly.

    It records when each request starts and ends and sleeps a little per request, so overlapping
    requests show that episodes run concurrently. This tests OUR client side (threads, payloads,
    resume) only; it says nothing about a real SGLang server.
    """

    def __init__(self, tok, delay=0.05):
        self.tok, self.delay, self.spans, self.lock = tok, delay, [], threading.Lock()
        self.im_end = tok.convert_tokens_to_ids("<|im_end|>")
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, obj):
                body = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._send({"ok": True})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                t0 = time.monotonic()
                time.sleep(srv.delay)
                out = [srv.answer(ids) for ids in body["input_ids"]]
                with srv.lock:
                    srv.spans.append((t0, time.monotonic(), body["sampling_params"].get("sampling_seed")))
                self._send(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, ids):
        prompt = self.tok.decode(ids)
        turn = prompt.count("<|im_start|>assistant") - 1
        want = ["pear", "milk"] if "pear and a milk" in prompt else ["apple"]
        script = [render_tool_call("add_to_cart", {"item": i, "qty": 2 if i == "apple" else 1}) for i in want]
        script += [render_tool_call("checkout", {}), "Done."]
        out = self.tok.encode(script[min(turn, len(script) - 1)], add_special_tokens=False) + [self.im_end]
        return {"text": "", "output_ids": out, "meta_info": {
            "finish_reason": {"type": "stop", "matched": self.im_end}, "cached_tokens": 0,
            "output_token_logprobs": [[-0.5, t, None] for t in out]}}

    def max_in_flight(self):
        events = sorted([(a, 1) for a, _, _ in self.spans] + [(b, -1) for _, b, _ in self.spans])
        now = best = 0
        for _, d in events:
            now += d
            best = max(best, now)
        return best

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class InFlightTokenizer:
    """Delegates to a tokenizer and records how many of its calls ever ran at once."""

    def __init__(self, tok):
        self._tok, self._lock, self.now, self.most = tok, threading.Lock(), 0, 0

    def __getattr__(self, name):
        attr = getattr(self._tok, name)
        if not callable(attr):
            return attr

        def counted(*a, **k):
            with self._lock:
                self.now += 1
                self.most = max(self.most, self.now)
            try:
                time.sleep(0.001)
                return attr(*a, **k)
            finally:
                with self._lock:
                    self.now -= 1
        return counted


def test_sglang_episodes_run_concurrently(model_dir, tmp_path):
    from harness.models import load_tokenizer

    tok = load_tokenizer(model_dir)
    srv = ScriptedServer(tok)
    try:
        c = cfg(model_dir, tmp_path, engine=EngineConfig(kind="sglang", urls=[srv.url]), n_samples=4, concurrency=8, max_turns=6)
        eng = SGLangEngine(srv.url, eos_token_ids=[srv.im_end])
        counting = InFlightTokenizer(tok)
        res = run_eval(c, eng, counting, log=lambda s: None)
        assert res.ran == 8 and not res.failed
        assert srv.max_in_flight() > 1  # requests overlapped: episodes were in flight together
        assert counting.most == 1  # ... while the shared tokenizer served one thread at a time
        _, verdicts, summary = check_consistent(tmp_path, [("lopd/shop-v0", t, k) for t in ("apples", "mix")
                                                             for k in range(4)])
        assert all(v["pass"] and v["reward"] == 1.0 for v in verdicts)  # the stub's script solves both
        assert summary["envs"]["lopd/shop-v0"]["pass_rate"] == 1.0
        # one seed per (task, sample); the rollout mixes it with the turn index (seed * 1_000_003 + turn)
        assert {s // 1_000_003 for _, _, s in srv.spans} == {
            pair_seed(0, "lopd/shop-v0", t, k) for t in ("apples", "mix") for k in range(4)}
        # through the CLI with the engine built from --server-url and the model dir's config
        n_before = len(srv.spans)
        rc = main(["eval", "--env", "shop-v0", "--model", model_dir, "--engine", "sglang", "--server-url", srv.url,
                   "--out", str(tmp_path / "cli"), "--n-samples", "2", "--quiet"])
        assert rc == 0 and len(srv.spans) > n_before
        check_consistent(tmp_path / "cli", SHOP_KEYS)
    finally:
        srv.close()
    assert main(["eval", "--env", "shop-v0", "--model", model_dir, "--engine", "sglang", "--server-url", srv.url,
                 "--server-wait", "2", "--out", str(tmp_path / "down")]) == 2  # no server: a clear error


# ---- official summaries on real benchmark envs (slow) -----------------------------------------

@pytest.mark.slow
@pytest.mark.skipif(not has_data("envscaler"), reason="EnvScaler data not found; set LOPD_DATA_DIR")
def test_envscaler_fixture(model_dir, engine, tmp_path):
    from envs.envscaler.metrics import summarize

    res = run_eval(cfg(model_dir, tmp_path, envs=["lopd/envscaler-fixture-v0"], max_turns=2,
                       max_new_tokens=4), engine, engine.tokenizer, log=lambda s: None)
    tasks = gym.make("lopd/envscaler-fixture-v0").unwrapped.tasks
    assert res.ran == len(tasks) >= 1
    eps, _, summary = check_consistent(tmp_path, [("lopd/envscaler-fixture-v0", t.task_id, 0) for t in tasks])
    official = summary["benchmarks"]["lopd/envscaler-fixture-v0"]["official"]
    assert official == summarize(eps)


@pytest.mark.slow
@pytest.mark.skipif(not has_data("bfcl_v3") or not has_data("acebench"), reason="BFCL/ACEBench data not found")
def test_bfcl_and_acebench_categories(model_dir, engine, tmp_path):
    from envs.acebench.scoring import Verdict, category_score, summary
    from envs.bfcl.scoring import summarize

    ace = "lopd/acebench-normal-en-v0"
    c = cfg(model_dir, tmp_path, envs=["lopd/bfcl-v3-simple-v0", "lopd/bfcl-v3-irrelevance-v0", ace], limit=2,
            env_kwargs={ace: {"categories": ["normal_atom_bool", "normal_multi_turn_user_adjust"]}},
            max_new_tokens=8)
    res = run_eval(c, engine, engine.tokenizer, log=lambda s: None)
    assert res.ran == 6 and not res.failed  # ACEBench's --limit counts tasks over both categories
    _, verdicts, s = check_consistent(tmp_path, [(v["env"], v["task_id"], 0) for v in lines(tmp_path / "verdicts.jsonl")])
    bfcl = [v for v in verdicts if v["env"].startswith("lopd/bfcl")]
    assert {v["category"] for v in bfcl} == {"simple", "irrelevance"}
    assert all("valid" in v["details"]["verdict"] for v in verdicts)  # the envs' verdict details are kept
    counts = {c_: (sum(v["pass"] for v in bfcl if v["category"] == c_), 2) for c_ in ("simple", "irrelevance")}
    assert s["benchmarks"]["bfcl-v3"]["official"] == json.loads(json.dumps(summarize(counts)))
    rows = sorted((v for v in verdicts if v["env"] == ace), key=lambda v: v["task_index"])
    scores = {}
    for cat in {v["category"] for v in rows}:
        mine = [v for v in rows if v["category"] == cat]
        vs = [Verdict(v["task_id"], cat, v["details"]["verdict"]["valid"]) for v in mine]
        scores[cat] = category_score(cat, vs, [v["task_id"] for v in mine])
    assert s["benchmarks"]["acebench-en"]["official"]["summary"] == summary(scores)["summary"]
    text = format_summary(s)
    assert "Overall Acc" in text and "== acebench-en:" in text and "normal_summary" in text


# ---- official summaries from hand-made verdicts (quick) ----------------------------------------

def V(env, task, sample, ok, category=None, index=0, **details):
    return {"env": env, "task_id": task, "task_index": index, "sample": sample, "category": category or env,
            "reward": 1.0 if ok else 0.0, "pass": ok, "steps": 1, "terminated": True, "truncated": False,
            "stop": None, "details": details}


def test_bfcl_summary_is_the_official_one_averaged_over_sample_runs():
    from envs.bfcl.scoring import summarize

    s0 = {"simple": [True, False], "irrelevance": [True, True], "live_simple": [True, False, False]}
    s1 = {"simple": [True, True], "irrelevance": [False, False], "live_simple": [True, True, True]}
    vs = [V(f"lopd/bfcl-v3-{c.replace('_', '-')}-v0", f"{c}_{i}", k, ok, c, i)
          for k, per in enumerate((s0, s1)) for c, oks in per.items() for i, ok in enumerate(oks)]
    b = summarize_verdicts(vs)["benchmarks"]["bfcl-v3"]
    want = [summarize({c: (sum(oks), len(oks)) for c, oks in per.items()}) for per in (s0, s1)]
    assert b["per_sample"] == json.loads(json.dumps(want)) and b["samples"] == 2
    for key in ("overall", "non_live", "live", "multi_turn", "irrelevance"):
        assert b["official"][key] == pytest.approx((want[0][key] + want[1][key]) / 2)
    assert b["official"]["categories"]["simple"]["accuracy"] == pytest.approx(0.75)
    assert b["official"]["categories"]["java"]["scored"] is False  # unscored categories count 0, as upstream


def test_acebench_summary_groups_multi_turn_dialogues_and_languages():
    from envs.acebench.data import NORMAL_CATEGORIES

    cat = "normal_multi_turn_user_adjust"
    env = "lopd/acebench-normal-en-v0"
    # dialogue 0 has turns 0 and 1 (one fails), dialogue 1 one turn (passes): end accuracy 1/2,
    # process accuracy mean(0.5, 1.0) = 0.75 (ACEBench's eval_main rules)
    vs = [V(env, f"{cat}_{d}_{t}", 0, ok, cat, i, verdict={"valid": ok, "error_type": ""})
          for i, (d, t, ok) in enumerate([(0, 0, True), (0, 1, False), (1, 0, True)])]
    vs.append(V("lopd/acebench-normal-zh-v0", "normal_atom_bool_0", 0, True, "normal_atom_bool",
                verdict={"valid": True}))
    bench = summarize_verdicts(vs)["benchmarks"]
    en, zh = bench["acebench-en"]["official"], bench["acebench-zh"]["official"]
    assert en["categories"][cat]["accuracy"] == 0.5 and en["categories"][cat]["process_accuracy"] == 0.75
    assert en["multi_turn_user_adjust"] == 0.5 and en["summary"] == round(0.578 * round(0.5 / len(NORMAL_CATEGORIES), 3), 3)
    assert zh["bool"] == 1.0 and "multi_turn_user_adjust" in zh and zh["multi_turn_user_adjust"] == 0.0



def test_printed_acebench_and_bfcl_summaries_mark_what_did_not_run():
    vs = [V("lopd/acebench-normal-en-v0", "normal_atom_bool_0", 0, True, "normal_atom_bool", verdict={"valid": True}),
          V("lopd/bfcl-v3-simple-v0", "simple_0", 0, True, "simple")]
    text = format_summary(summarize_verdicts(vs))
    ace = text.split("== acebench-en:", 1)[1].split("\n== ", 1)[0]
    assert "bool            1.0000" in ace and "agent_summary" in ace.split("not run", 1)[1]
    assert "0.0000" not in ace  # a category not run is named, not scored 0
    bfcl = {" ".join(line.split()[:-1]): line.split()[-1] for line in text.split("== bfcl-v3:", 1)[1].splitlines()[2:]}
    assert bfcl["Live Overall Acc"] == "N/A" and bfcl["Multi Turn Overall Acc"] == "N/A"

def test_evalplus_summary_is_pass_at_k_over_samples():
    from envs.evalplus.scoring import pass_at_k

    env = "lopd/evalplus-humaneval-v0"
    grid = {"HumanEval/0": [(True, "pass"), (False, "pass")], "HumanEval/1": [(False, "fail"), (False, "pass")]}
    vs = [V(env, t, k, ok, verdict={"pass": ok, "base_status": base, "mode": "strict"})
          for t, runs in grid.items() for k, (ok, base) in enumerate(runs)]
    b = summarize_verdicts(vs)["benchmarks"][env]
    assert b["source"] == "envs.evalplus.scoring.pass_at_k" and "per_sample" not in b
    assert b["official"]["pass@k"]["plus"] == pass_at_k({t: [ok for ok, _ in r] for t, r in grid.items()})
    assert b["official"]["pass@k"]["plus"]["pass@1"] == 0.25
    assert b["official"]["pass@k"]["base"]["pass@1"] == 0.75
    assert b["official"]["dataset"] == "humaneval" and b["official"]["mode"] == "strict"


def test_livecodebench_summary_is_its_pass_at_k():
    from envs.livecodebench.scoring import pass_at_k

    env = "lopd/livecodebench-v0"
    grid = {"q1": [True, True], "q2": [False, True], "q3": [False, False]}
    vs = [V(env, q, k, ok, verdict={"pass": ok, "mode": "official", "note": "public tests only"})
          for q, oks in grid.items() for k, ok in enumerate(oks)]
    b = summarize_verdicts(vs)["benchmarks"][env]
    assert b["source"] == "envs.livecodebench.scoring.pass_at_k"
    assert b["official"]["pass@k"] == pass_at_k(grid) and b["official"]["pass@k"]["pass@1"] == pytest.approx(0.5)
    assert b["official"]["public_only"] is True and b["official"]["problems"] == 3
    assert "WARNING" in format_summary(summarize_verdicts(vs))  # its own printout, public-only note included


def test_a_failing_summarizer_falls_back_to_the_generic_summary(monkeypatch):
    from harness.evaluation import summary as eval_summary

    def broken(vs):
        raise ImportError("not finished yet")
    monkeypatch.setitem(eval_summary.SUMMARIZERS, "examples",
                        eval_summary.Summarizer("envs.examples.nothing", broken, lambda e: "shop"))
    vs = [V("lopd/shop-v0", "apples", 0, True), V("lopd/shop-v0", "mix", 0, False)]
    s = summarize_verdicts(vs)
    b = s["benchmarks"]["shop"]
    assert b["source"] == "generic" and "not finished yet" in b["fallback"]
    assert b["official"]["pass_rate"] == 0.5 == s["envs"]["lopd/shop-v0"]["pass_rate"]
    assert "fallback to the generic summary" in eval_summary.format_summary(s)


@pytest.mark.slow
def test_sigkill_mid_run_then_resume(model_dir, tmp_path):
    """A real ``kill -9`` of ``lopd eval`` part-way, then the same command again."""
    import os
    import signal
    import subprocess
    import sys

    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "harness", "eval", "--env", "shop-v0", "--model", model_dir, "--out", str(out),
           "--n-samples", "8", "--batch-size", "1", "--max-new-tokens", "48", "--max-turns", "4", "--quiet"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            p = out / "traces.jsonl"
            if p.exists() and p.read_bytes().count(b"\n") >= 3:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the run finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    done_before = len(read_progress(out, repair=False).traces)
    assert 3 <= done_before < 16
    assert subprocess.run(cmd, check=False, env=env, stdout=subprocess.DEVNULL, timeout=300).returncode == 0
    check_consistent(out, [("lopd/shop-v0", t, k) for t in ("apples", "mix") for k in range(8)])
