"""Statistics against hand-counted traces."""
import csv
import io
import json
import math

import pytest

from envs.trace import CallRecord, Episode, Step, write_traces
from harness.cli import main
from harness.stats import collect, compare_rows, episode_stats, tool_rows


def C(name, args=None, executed=True, error=None, parse_error=None):
    return CallRecord(name, args if args is not None else {}, parse_error=parse_error, executed=executed, error=error)


def spray_episode():
    """Vanilla-like: parallel speculative calls, repeats, errors. Hand counts in comments."""
    return Episode("lopd/shop-v0", "t1", meta={"run": "base", "learner": "none", "category": "shop"}, steps=[
        Step(0, "a", token_ids=list(range(12)), calls=[C("price", {"item": "apple"}), C("price", {"item": "pear"}),
                                                       C("add_to_cart", {"item": "apple", "qty": 2})]),
        # the same price call again (repeat #1), an unparsable block, a tool error
        Step(1, "b", calls=[C("price", {"item": "apple"}), C(None, None, executed=False, parse_error="bad JSON"),
                            C("checkout", error="Error: boom")]),
        # identical args with different key order is still a repeat (#2)
        Step(2, "c", calls=[C("add_to_cart", {"qty": 2, "item": "apple"})], reward=0.0),
        Step(3, "done", reward=0.5, terminated=True),
    ], reward=0.5)


def sequential_episode():
    return Episode("lopd/shop-v0", "t2", meta={"run": "trained", "learner": "lopd", "category": "shop"}, steps=[
        Step(0, "a", token_ids=list(range(5)), calls=[C("add_to_cart", {"item": "apple", "qty": 2})]),
        Step(1, "b", calls=[C("checkout")]),
        Step(2, "ok", reward=1.0, terminated=True),
    ], reward=1.0)


def as_dict(ep):
    return json.loads(ep.to_json())


def test_hand_counted_spray_episode():
    s = episode_stats(as_dict(spray_episode()))
    assert s["env_steps"] == 4
    assert s["calls_per_step"] == 7 / 4          # every <tool_call> block counts, the unparsable one too
    assert s["first_response_tokens"] == 12
    assert s["repeated_calls"] == 2
    assert s["reward_per_call"] == 0.5 / 7
    assert s["parse_error_rate"] == 1 / 4        # one of four steps had a parse error
    assert s["tool_error_rate"] == 1 / 6         # six executed calls, one failed
    assert s["turns_to_first_success"] is None   # 0.5 < success threshold 1.0
    assert s["success"] == 0.0
    assert s["calls_by_tool"] == {"price": 3, "add_to_cart": 2, "checkout": 1}
    assert episode_stats(as_dict(spray_episode()), success_threshold=0.5)["turns_to_first_success"] == 4


def test_hand_counted_sequential_episode_and_empty_cases():
    s = episode_stats(as_dict(sequential_episode()))
    assert (s["env_steps"], s["calls_per_step"], s["repeated_calls"], s["turns_to_first_success"]) == (3, 2 / 3, 0, 3)
    empty = episode_stats(as_dict(Episode("e", "t")))
    assert empty["env_steps"] == 0 and empty["calls_per_step"] is None and empty["reward_per_call"] is None
    no_tokens = episode_stats(as_dict(Episode("e", "t", steps=[Step(0, "x")])))
    assert no_tokens["first_response_tokens"] is None and no_tokens["tool_error_rate"] is None


def test_hand_counted_repeats_within_one_response():
    # one response: f(a=1) three times (2 repeats), f(a=2) and g(a=1) once (same name or args, not both)
    ep = Episode("e", "t", steps=[Step(0, "x", calls=[C("f", {"a": 1}), C("f", {"a": 1}), C("f", {"a": 2}),
                                                      C("g", {"a": 1}), C("f", {"a": 1})])], reward=1.0)
    s = episode_stats(as_dict(ep))
    assert (s["repeated_calls"], s["calls_per_step"], s["reward_per_call"]) == (2, 5.0, 0.2)
    assert s["calls_by_tool"] == {"f": 4, "g": 1} and s["turns_to_first_success"] == 1


def test_module_doctests():
    import doctest

    import harness.stats.episodes

    result = doctest.testmod(harness.stats.episodes)
    assert result.failed == 0 and result.attempted > 0


def test_grouping_compare_and_cli(tmp_path, capsys):
    a, b = tmp_path / "base.jsonl", tmp_path / "trained.jsonl"
    write_traces(a, [spray_episode(), spray_episode()])
    write_traces(b, [sequential_episode()])
    groups = collect([a, b], by="learner")
    assert set(groups) == {"none", "lopd"} and groups["none"].episodes == 2
    rows = {r["metric"]: r for r in compare_rows(collect([a, b]), "base", "trained")}
    assert rows["calls_per_step"]["base"] == 7 / 4 and rows["calls_per_step"]["trained"] == 2 / 3
    assert rows["repeated_calls"]["delta"] == -2
    assert math.isclose(rows["env_steps"]["delta_pct"], -25.0)
    with pytest.raises(KeyError, match="no group named 'x'"):
        compare_rows(groups, "x", "lopd")

    assert main(["stats", str(a), str(b), "--compare", "base", "trained", "--plot", str(tmp_path / "figs")]) == 0
    out = capsys.readouterr().out
    assert "calls_per_step" in out and "delta" in out
    assert (tmp_path / "figs" / "distributions.png").stat().st_size > 10_000
    assert (tmp_path / "figs" / "calls_by_tool.png").exists()
    assert main(["stats", str(a), "--format", "json", "--by", "category"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {r["group"] for r in data} == {"shop"}
    assert main(["stats", str(a), str(b), "--format", "csv", "--by", "env"]) == 0
    rows = [r for r in csv.DictReader(io.StringIO(capsys.readouterr().out)) if r["metric"] == "env_steps"]
    assert [(r["group"], float(r["mean"]), int(r["n"])) for r in rows] == [("lopd/shop-v0", (4 + 4 + 3) / 3, 3)]
    m = tmp_path / "run1" / "metrics.jsonl"
    m.parent.mkdir()
    m.write_text("\n".join(json.dumps({"generations": g, "eval/reward": g / 100}) for g in (0, 32, 64)) + "\n")
    assert main(["stats", str(a), "--plot", str(tmp_path / "figs2"), "--metrics", str(m)]) == 0
    assert (tmp_path / "figs2" / "reward_vs_generations.png").stat().st_size > 5_000
    assert "reward_vs_generations.png" in capsys.readouterr().err


def test_corrupt_and_empty_inputs(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    write_traces(bad, [sequential_episode()])
    with open(bad, "a") as f:
        f.write('{"version": 1, "steps": 5}\n{"truncated\n')
    assert main(["stats", str(bad)]) == 2
    assert "bad.jsonl:2" in capsys.readouterr().err
    assert main(["stats", str(bad), "--skip-bad"]) == 0
    err = capsys.readouterr().err
    assert "bad.jsonl:2" in err and "bad.jsonl:3" in err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["stats", str(empty)]) == 2
    assert "no episodes found" in capsys.readouterr().err


def test_learning_curve_plot(tmp_path, capsys):
    from harness.stats.plots import plot_learning_curves

    m = tmp_path / "run1" / "metrics.jsonl"
    m.parent.mkdir()
    m.write_text("\n".join(json.dumps({"generations": g, "eval/reward": g / 100}) for g in (0, 32, 64)) + "\nnot json\n")
    assert plot_learning_curves([m], tmp_path / "curve.png").stat().st_size > 5_000
    with pytest.raises(ValueError, match="has both"):
        plot_learning_curves([m], tmp_path / "x.png", y="missing")


def test_calls_by_tool_in_every_format(tmp_path, capsys):
    a, b = tmp_path / "base.jsonl", tmp_path / "trained.jsonl"
    write_traces(a, [spray_episode(), spray_episode()])
    write_traces(b, [sequential_episode()])
    # base: price 3+3, add_to_cart 2+2, checkout 1+1 (the unparsable block has no name); trained: one each
    want = {("base", "price", 6, 6 / 12), ("base", "add_to_cart", 4, 4 / 12), ("base", "checkout", 2, 2 / 12),
            ("trained", "add_to_cart", 1, 0.5), ("trained", "checkout", 1, 0.5)}

    def got(rows):
        return {(r["group"], r["tool"], int(r["count"]), float(r["share"])) for r in rows
                if r["metric"] == "calls_by_tool"}

    assert [r["tool"] for r in tool_rows(collect([a]))] == ["price", "add_to_cart", "checkout"]  # most first
    assert main(["stats", str(a), str(b), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert got(rows) == want and {r["metric"] for r in rows if "tool" not in r} >= {"calls_per_step"}
    assert main(["stats", str(a), str(b), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert got(rows) == want
    assert main(["stats", str(a), str(b)]) == 0
    text = capsys.readouterr().out.split("calls per tool\n")[1]
    assert text.splitlines()[0].split() == ["group", "tool", "count", "share"]
    assert ["base", "price", "6", "0.5"] in [line.split() for line in text.splitlines()]
    assert main(["stats", str(a), str(b), "--compare", "base", "trained", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert got(rows) == want and rows[0]["metric"] == "env_steps" and rows[0]["delta"]


def test_bad_meta_directories_and_metrics_without_plot(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    write_traces(bad, [sequential_episode()])
    with open(bad, "a") as f:
        f.write(json.dumps({**as_dict(sequential_episode()), "meta": ["not", "an", "object"]}) + "\n")
    assert main(["stats", str(bad)]) == 2  # a message naming file and line, no traceback
    assert "bad.jsonl:2: malformed episode" in capsys.readouterr().err
    assert main(["stats", str(bad), "--skip-bad", "--format", "json"]) == 0
    assert "skipped" in (cap := capsys.readouterr()).err and "bad.jsonl:2" in cap.err
    assert {r["n"] for r in json.loads(cap.out) if r["metric"] == "env_steps"} == {1}

    run = tmp_path / "run-a"
    run.mkdir()
    write_traces(run / "traces.jsonl", [sequential_episode()])
    assert main(["stats", str(run), "--format", "json"]) == 0  # a run directory stands for its traces.jsonl
    assert {r["group"] for r in json.loads(capsys.readouterr().out)} == {"trained"}
    assert main(["stats", str(tmp_path)]) == 2
    assert "directory without a traces.jsonl" in capsys.readouterr().err

    m = tmp_path / "metrics.jsonl"
    m.write_text(json.dumps({"generations": 0, "eval/reward": 0.1}) + "\n")
    assert main(["stats", str(run), "--metrics", str(m)]) == 2
    assert "--metrics needs --plot" in capsys.readouterr().err


def test_by_run_without_meta_run_names_traces_files_by_folder(tmp_path):
    for name, ep in (("base", spray_episode()), ("lopd", sequential_episode())):
        ep.meta.pop("run")
        (tmp_path / name).mkdir()
        write_traces(tmp_path / name / "traces.jsonl", [ep])
    write_traces(tmp_path / "other.jsonl", [Episode("e", "t")])
    paths = [tmp_path / "base" / "traces.jsonl", tmp_path / "lopd" / "traces.jsonl", tmp_path / "other.jsonl"]
    groups = collect(paths)
    assert {g: s.episodes for g, s in groups.items()} == {"base": 1, "lopd": 1, "other": 1}


def several_groups_with_bad_lines(path):
    """17 lines: three runs interleaved, a truncated line (12) and a record of the wrong shape (15)."""
    eps = []
    for i in range(15):
        ep = spray_episode() if i % 2 else sequential_episode()
        ep.meta["run"] = f"run{i % 3}"
        ep.reward = i / 14
        eps.append(ep)
    lines = [ep.to_json() for ep in eps]
    lines.insert(11, '{"version": 1, "steps": [')
    lines.insert(14, json.dumps({**as_dict(sequential_episode()), "meta": ["not", "an", "object"]}))
    path.write_text("\n".join(lines) + "\n")


def test_parallel_reading_equals_serial(tmp_path, monkeypatch, capsys):
    import harness.stats.parallel as par
    from envs.trace import TraceError
    from harness.stats import table_rows

    f = tmp_path / "mixed.jsonl"
    several_groups_with_bad_lines(f)
    monkeypatch.setattr(par, "MIN_RANGE", 1)  # 4 ranges a file with 2 workers: the bad lines are not in the first
    assert par.split_lines(f, 4)[1][0] < f.read_bytes().index(b'"steps": [')

    results = {}
    for workers in (1, 2, 3):
        errors = []
        groups = collect([f, f], skip_bad=True, errors=errors, workers=workers)  # two files: ranges of each
        results[workers] = (list(groups), repr(table_rows(groups)), repr(tool_rows(groups)),
                            {g: (s.episodes, dict(s.values)) for g, s in groups.items()}, [str(e) for e in errors])
    assert results[2] == results[1] and results[3] == results[1]
    assert results[1][0] == ["run0", "run1", "run2"]
    assert [e.split(": ")[0].rsplit(":", 1)[1] for e in results[1][4]] == ["12", "15", "12", "15"]
    for workers in (1, 2):
        with pytest.raises(TraceError, match=r"mixed\.jsonl:12: "):  # the first bad line in file order
            collect([f], workers=workers)

    outs = []
    for workers in ("1", "2"):
        assert main(["stats", str(f), "--skip-bad", "--format", "json", "--workers", workers]) == 0
        cap = capsys.readouterr()
        outs.append(cap.out)
        assert "mixed.jsonl:12" in cap.err and "mixed.jsonl:15: malformed episode" in cap.err
    assert outs[0] == outs[1]
    assert main(["stats", str(f), "--workers", "2"]) == 2
    assert "mixed.jsonl:12" in capsys.readouterr().err


def test_split_lines_on_line_boundaries(tmp_path, monkeypatch):
    import harness.stats.parallel as par
    from envs.trace import iter_records

    f = tmp_path / "t.jsonl"
    records = [{"version": 1, "i": i, "pad": "x" * (i * 37 % 300)} for i in range(40)]
    text = "\n".join(json.dumps(r) for r in records[:20]) + "\n\n" + "\n".join(json.dumps(r) for r in records[20:])
    f.write_text(text)  # a blank line, no newline at the end
    data = f.read_bytes()
    for pieces in range(1, 60):
        ranges = par.split_lines(f, pieces)
        assert 1 <= len(ranges) <= pieces and ranges[0][0] == 0 and ranges[-1][1] == len(data)
        assert all(a < b == c for (a, b), (c, _) in zip(ranges, ranges[1:] + [(len(data), None)]))
        assert all(start == 0 or data[start - 1:start] == b"\n" for start, _ in ranges)
        got = [ep for start, end in ranges for _, ep in iter_records(f, span=(start, end))]
        assert got == records
    (tmp_path / "empty.jsonl").write_text("")
    assert par.split_lines(tmp_path / "empty.jsonl", 4) == []
    assert par.default_workers([f]) == 1  # small input: one process
    monkeypatch.setattr(par, "AUTO_BYTES", 0)
    assert par.default_workers([f]) == min(2, par.cpus())
    with pytest.raises(ValueError, match="at least 1"):
        collect([f], workers=0)


def test_calls_by_tool_figure_is_bounded_and_its_legend_names_the_groups_with_calls(tmp_path):
    from collections import Counter

    from matplotlib.image import imread

    from harness.stats.episodes import GroupStats
    from harness.stats.plots import calls_by_tool_figure, plot_calls_by_tool

    tools = [f"tool_{i}_" + "x" * (i % 5) * 8 for i in range(40)]
    groups = {f"category-{k}": GroupStats(calls_by_tool=Counter({t: (k + i) % 7 + 1 for i, t in enumerate(tools)}))
              for k in range(12)}
    groups["category-3"] = GroupStats()  # played, but no call: not in the legend
    fig = calls_by_tool_figure(groups)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len(legend) == 8 and "category-3" not in legend  # the 8 groups with the most calls, in order
    assert legend == sorted(legend, key=lambda s: int(s.split("-")[1]))
    assert all(len(ax.get_xticks()) <= 10 for ax in fig.axes)  # 20 tools wrapped into rows of 10
    assert min(t.get_fontsize() for ax in fig.axes for t in ax.get_xticklabels()) >= 9
    h, w = imread(plot_calls_by_tool(groups, tmp_path / "calls_by_tool.png")).shape[:2]
    assert w <= 1600 and h <= 1000, (w, h)  # was 0.5 in per tool and group: 4800 x 480 px
    one = calls_by_tool_figure({"a": groups["category-0"], "b": GroupStats()}, top=5)
    assert [t.get_text() for t in one.legends[0].get_texts()] == ["a"]
