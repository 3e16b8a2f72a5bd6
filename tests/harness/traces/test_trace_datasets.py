"""Traces out as Hugging Face datasets and back, through the real ``datasets`` library, and ``lopd stats`` on
datasets: export then import gives episodes whose statistics equal the original's."""
import json

import datasets
import pytest

from envs.examples.shop import ShopEnv
from envs.protocol import render_tool_call
from envs.trace import Episode, read_traces, write_traces
from harness.cli import main
from harness.stats import collect, table_rows, tool_rows

datasets.disable_progress_bars()


def act(*calls):
    return "\n".join(render_tool_call(n, a) for n, a in calls)


SCRIPTS = [  # tool errors, a parse error, a stray tag, repeats, an outcome reward, an unfinished episode
    [act(("add_to_cart", {"item": "apple", "qty": 2}), ("checkout", {})), "All done."],
    [act(("add_to_cart", {"item": "apple"}), ("fly", {})), '<tool_call>{"name": "checkout", "arguments": {</tool_call>',
     "</tool_call>", act(("price", {"item": "apple"}), ("price", {"item": "apple"})), act(("checkout", {})), "bye"],
    [act(("price", {"item": "pear"}))],
]


def play(script, i):
    """An episode as the rollout records one: the env's messages and steps, token ids on each step."""
    env = ShopEnv()
    _, info = env.reset(seed=i, options={"task_id": "apples"})
    ep = Episode("lopd/shop-v0", info["task_id"], split="eval", seed=i, messages=info["messages"],
                 tools=info["tools"], prompt_token_ids=[1, 2, 3], meta={"run": f"run{i % 2}", "learner": "grpo"})
    for text in script:
        _, reward, term, trunc, info = env.step(text)
        step = info["step"]
        step.token_ids, step.logprobs = list(range(len(text) % 7 + 1)), [-0.5] * (len(text) % 7 + 1)
        ep.steps.append(step)
        ep.messages += info["messages"]
        ep.reward, ep.terminated, ep.truncated = float(info.get("final_reward", reward)), term, trunc
    ep.timings = {"generate": 0.25, "env": 0.01}
    return ep


@pytest.fixture
def traces(tmp_path):
    eps = [play(s, i) for i, s in enumerate(SCRIPTS * 2)]
    path = tmp_path / "traces.jsonl"
    write_traces(path, eps)
    return path, eps


def stats_of(paths, by="run"):
    groups = collect([str(p) for p in paths], by)
    return table_rows(groups), tool_rows(groups, None)


def test_hf_export_loads_with_datasets_and_holds_openai_tool_calls(traces, tmp_path):
    path, eps = traces
    assert main(["traces", "export", str(path), "--out", str(tmp_path / "ds"), "--format", "hf"]) == 0
    ds = datasets.load_from_disk(str(tmp_path / "ds"))
    assert len(ds) == len(eps)
    for col in ("messages", "tools", "reward", "env_id", "task_id", "split", "meta", "seed", "n_steps", "steps"):
        assert col in ds.column_names
    row, ep = ds[0], eps[0]
    assert (row["env_id"], row["task_id"], row["split"], row["seed"]) == ("lopd/shop-v0", "apples", "eval", 0)
    assert row["reward"] == ep.reward == 1.0 and row["n_steps"] == 2 and row["meta"] == ep.meta
    assert row["tools"] == ep.tools  # the OpenAI function schemas, whole
    roles = [m["role"] for m in row["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant"]
    first = row["messages"][2]
    assert first["content"] == ep.steps[0].text  # the assistant's text is kept
    calls = first["tool_calls"]
    assert [c["type"] for c in calls] == ["function", "function"]
    assert [c["function"]["name"] for c in calls] == ["add_to_cart", "checkout"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"item": "apple", "qty": 2}
    assert [m["tool_call_id"] for m in row["messages"][3:5]] == [c["id"] for c in calls]
    assert row["messages"][5]["tool_calls"] is None  # the final answer calls nothing
    # the call that did not parse is no tool_call; the tool message answering it points at none
    bad = ds[1]["messages"]
    parse_turn = next(i for i, m in enumerate(bad) if m["content"] == SCRIPTS[1][1])
    assert bad[parse_turn]["tool_calls"] is None and bad[parse_turn + 1]["tool_call_id"] is None
    assert bad[parse_turn + 2]["tool_calls"] is None and bad[parse_turn + 3]["tool_call_id"] is None  # stray tag


def test_hf_round_trip_gives_back_the_episodes_and_their_stats(traces, tmp_path):
    path, eps = traces
    main(["traces", "export", str(path), "--out", str(tmp_path / "ds")])
    assert main(["traces", "import", str(tmp_path / "ds"), "--out", str(tmp_path / "back" / "traces.jsonl")]) == 0
    back = list(read_traces(tmp_path / "back" / "traces.jsonl"))
    assert back == eps
    assert stats_of([tmp_path / "back"]) == stats_of([path])
    assert stats_of([tmp_path / "ds"]) == stats_of([path])  # lopd stats reads the saved folder itself


def test_openai_jsonl_and_parquet_round_trips(traces, tmp_path):
    path, eps = traces
    out = tmp_path / "rows.jsonl"
    assert main(["traces", "export", str(path), "--out", str(out), "--format", "openai-jsonl"]) == 0
    first = json.loads(out.read_text().splitlines()[0])
    assert first["messages"][0] == {"role": "system", "content": eps[0].messages[0]["content"]}  # no null keys
    assert first["messages"][2]["tool_calls"][1]["function"] == {"name": "checkout", "arguments": "{}"}
    main(["traces", "import", str(out), "--out", str(tmp_path / "a.jsonl")])
    assert list(read_traces(tmp_path / "a.jsonl")) == eps
    main(["traces", "export", str(path), "--out", str(tmp_path / "ds")])
    datasets.load_from_disk(str(tmp_path / "ds")).to_parquet(str(tmp_path / "rows.parquet"))
    main(["traces", "import", str(tmp_path / "rows.parquet"), "--out", str(tmp_path / "b.jsonl")])
    assert list(read_traces(tmp_path / "b.jsonl")) == eps
    assert stats_of([out]) == stats_of([tmp_path / "rows.parquet"]) == stats_of([path])


def foreign_rows(eps):
    """Rows as another project would publish them: OpenAI messages and a reward, none of our step records."""
    rows = []
    for i, ep in enumerate(eps):
        from envs.trace_rows import episode_to_row

        row = episode_to_row(ep)
        rows.append({"id": f"x{i}", "messages": row["messages"], "reward": row["reward"]})
    return rows


def test_stats_on_a_foreign_dataset_built_with_datasets(traces, tmp_path, capsys):
    path, eps = traces
    datasets.Dataset.from_list(foreign_rows(eps)).save_to_disk(str(tmp_path / "foreign"))
    groups = collect([str(tmp_path / "foreign")], "run")
    assert list(groups) == ["foreign"] and groups["foreign"].episodes == len(eps)
    mine, theirs = collect([str(path)], "env")["lopd/shop-v0"].summary(), groups["foreign"].summary()
    # what the messages hold comes back; execution errors, token counts and calls that did not parse
    # (no tool_call can hold one) are not in them
    for m in ("env_steps", "repeated_calls", "reward", "success", "turns_to_first_success"):
        assert theirs[m] == mine[m], m
    assert theirs["first_response_tokens"].n == 0 and theirs["tool_error_rate"].mean == 0.0
    assert theirs["calls_per_step"].mean < mine["calls_per_step"].mean
    assert main(["stats", str(tmp_path / "foreign"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["group"] == "foreign"


@pytest.mark.parametrize("kind", ["folder", "parquet", "jsonl"])
def test_a_foreign_dataset_without_a_column_is_a_clear_error(traces, tmp_path, capsys, kind):
    rows = [{k: v for k, v in r.items() if k != "reward"} for r in foreign_rows(traces[1])]
    ds = datasets.Dataset.from_list(rows)
    src = tmp_path / {"folder": "ds", "parquet": "rows.parquet", "jsonl": "rows.jsonl"}[kind]
    {"folder": ds.save_to_disk, "parquet": ds.to_parquet, "jsonl": ds.to_json}[kind](str(src))
    assert main(["stats", str(src)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lopd stats: error: ") and "no 'reward' column" in err and "Traceback" not in err
    no_messages = datasets.Dataset.from_list([{"prompt": "p", "reward": 1.0}])
    no_messages.save_to_disk(str(tmp_path / "nm"))
    assert main(["traces", "import", str(tmp_path / "nm"), "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "no 'messages' column" in capsys.readouterr().err


def test_a_corrupt_trace_line_is_named_and_skipped_only_when_asked(traces, tmp_path, capsys):
    path, eps = traces
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:2] + ['{"version": 1, "env_id": '] + lines[2:]) + "\n")
    out = tmp_path / "ds"
    assert main(["traces", "export", str(path), "--out", str(out)]) == 2
    assert f"{path}:3: " in capsys.readouterr().err and not out.exists()
    assert main(["traces", "export", str(path), "--out", str(out), "--skip-bad"]) == 0
    assert f"skipped {path}:3: " in capsys.readouterr().err
    assert len(datasets.load_from_disk(str(out))) == len(eps)
    assert main(["traces", "export", str(path), "--out", str(out), "--skip-bad"]) == 2  # exists: not replaced
    assert "--force" in capsys.readouterr().err


def test_a_bad_row_of_an_openai_jsonl_is_named(traces, tmp_path, capsys):
    path, _ = traces
    rows = tmp_path / "rows.jsonl"
    main(["traces", "export", str(path), "--out", str(rows), "--format", "openai-jsonl"])
    text = rows.read_text().splitlines()
    rows.write_text("\n".join(text[:1] + ["not json", '{"messages": 3, "reward": 1}', '{"messages": []}'] + text[1:]) + "\n")
    assert main(["stats", str(rows)]) == 2
    assert f"{rows}:2: " in capsys.readouterr().err
    assert main(["stats", str(rows), "--skip-bad"]) == 0
    err = capsys.readouterr().err
    assert f"skipped {rows}:2: " in err and f"skipped {rows}:3: bad row" in err and "'messages' must be a list" in err
    assert f"skipped {rows}:4: bad row: ValueError: the row has no 'reward'" in err


def test_extra_message_keys_splits_and_workers(traces, tmp_path):
    path, eps = traces
    eps[0].messages[2]["reasoning_content"] = "think"  # a key beyond OpenAI's: kept as a Json field
    from harness.traces import write_hf

    write_hf(eps, tmp_path / "ds")
    assert list(datasets.load_from_disk(str(tmp_path / "ds")))[0]["messages"][2]["reasoning_content"] == "think"
    from harness.traces import read_episodes

    assert list(read_episodes(tmp_path / "ds")) == eps
    rows = foreign_rows(eps)
    dd = datasets.DatasetDict({"train": datasets.Dataset.from_list(rows[:2]),
                               "test": datasets.Dataset.from_list(rows[2:])})
    dd.save_to_disk(str(tmp_path / "dd"))
    back = list(read_episodes(tmp_path / "dd"))
    assert [e.split for e in back] == ["train"] * 2 + ["test"] * (len(rows) - 2)
    assert [e.env_id for e in back] == ["dd"] * len(rows)
    mixed = [str(tmp_path / "dd"), str(path)]
    one, two = collect(mixed, "run", workers=1), collect(mixed, "run", workers=2)
    assert list(one) == list(two) == ["dd", "run0", "run1"]
    assert all(one[k].summary() == two[k].summary() for k in one)
