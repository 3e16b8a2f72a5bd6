"""`lopd bank build/add/query/stats` end to end with the real MiniLM model."""

from __future__ import annotations

import json

import numpy as np
import pytest
from bank_fixtures import TASKS, task_episodes

from envs.trace import write_traces
from harness.cli import main


@pytest.mark.slow
def test_cli_end_to_end(tmp_path, capsys):
    first, second, evals = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "eval.jsonl"
    eps = task_episodes()
    write_traces(first, eps[:3])
    write_traces(second, eps[2:])  # one duplicate of the first file
    write_traces(evals, task_episodes(split="eval"))
    out = tmp_path / "bank"

    assert main(["bank", "build", "--traces", str(first), str(evals), "--out", str(out),
                 "--set", "embed_text=task", "observation_chars=40", "embed_threads=1"]) == 0
    text = capsys.readouterr()
    assert "kept 3" in text.out and "6 non-training split" in text.out and "refused" in text.err
    assert main(["bank", "build", "--traces", str(first), "--out", str(out)]) == 2  # no silent overwrite
    assert "already holds a bank" in capsys.readouterr().err

    assert main(["bank", "add", str(out), "--traces", str(second), str(evals), "--set", "embed_threads=1"]) == 0
    text = capsys.readouterr().out
    assert "kept 3" in text and "1 duplicate" in text and "now holds 6" in text

    assert main(["bank", "query", str(out), TASKS["transfer"][1], "-k", "2"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("#1  score=") and "task=transfer" in text.splitlines()[0] and "#2" in text
    assert '[2] Action: {"name": "transfer", "arguments": {"from": "checking", "to": "savings", "amount": 200}}' \
        in text.split("#2")[0]
    assert main(["bank", "query", str(out), TASKS["transfer"][0], "-k", "1", "--json"]) == 0
    (hit,) = json.loads(capsys.readouterr().out)
    assert hit["task_id"] != "transfer"  # its own identical task text is excluded by default
    assert main(["bank", "query", str(out), TASKS["transfer"][0], "-k", "1", "--json", "--include-self"]) == 0
    (hit,) = json.loads(capsys.readouterr().out)
    assert hit["task_id"] == "transfer" and hit["score"] > 0.99 and hit["source"]["line"] == 4
    assert hit["source"]["file"] == str(second.resolve())

    assert main(["bank", "stats", str(out), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["entries"] == 6 and st["dim"] == 384 and st["envs"]["lopd/shop-v0"]["index"] == "flat"
    assert st["disk_bytes"] > 6 * 384 * 4 and st["embed_text"] == "task"
    assert main(["bank", "stats", str(out)]) == 0
    assert "6 experiences" in capsys.readouterr().out

    vec = next(out.glob("v*/vectors.npy"))
    vec.write_bytes(vec.read_bytes()[:-4] + b"\0\0\0\1")
    assert main(["bank", "query", str(out), "anything"]) == 2
    assert "fails its SHA-256 checksum" in capsys.readouterr().err


def test_cli_stats_and_errors_without_a_model(tmp_path, capsys):
    from lopd.bank import BankConfig, ExperienceBank
    from lopd.bank.experience import SourceRef
    from lopd.bank.ingest import to_experience

    bank = ExperienceBank(BankConfig())
    exps = [to_experience(e, SourceRef("f", i + 1, i), bank.config) for i, e in enumerate(task_episodes())]
    bank.add_experiences(exps, np.random.default_rng(0).standard_normal((len(exps), 16)))
    bank.save(tmp_path / "b")
    assert main(["bank", "stats", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "6 experiences, 6 tasks, dim 16" in out and "lopd/shop-v0: 6 entries" in out and "index flat" in out
    assert main(["bank", "stats", str(tmp_path / "nope")]) == 2
    assert "no bank at" in capsys.readouterr().err
    (tmp_path / "b" / "CURRENT").write_text("garbage")
    assert main(["bank", "stats", str(tmp_path / "b")]) == 2
    assert "corrupt" in capsys.readouterr().err
    assert main(["bank", "build", "--traces", "x.jsonl", "--out", str(tmp_path / "c"), "--set", "top_k=0"]) == 2
    assert "top_k must be >= 1" in capsys.readouterr().err
    assert main(["bank", "build", "--traces", "x.jsonl", "--out", str(tmp_path / "c"),
                 "--set", "train_splits=[train,test]"]) == 2
    assert "evaluation splits" in capsys.readouterr().err
    assert main(["bank", "build", "--traces", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "c")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err and not (tmp_path / "c").exists()


def test_cli_refuses_non_bank_dirs_and_bad_runtime_values(tmp_path, capsys):
    (tmp_path / "mine.txt").write_text("x")
    trace = tmp_path / "t.jsonl"
    write_traces(trace, task_episodes(split="eval"))  # nothing to embed: the model never loads
    assert main(["bank", "build", "--traces", str(trace), "--out", str(tmp_path)]) == 2
    assert "not a bank" in capsys.readouterr().err and sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt", "t.jsonl"]
    assert main(["bank", "build", "--traces", str(trace), "--out", str(tmp_path / "b")]) == 0
    assert "kept 0" in capsys.readouterr().out
    assert main(["bank", "query", str(tmp_path / "b"), "x", "--set", "top_k=many"]) == 2
    assert "top_k" in capsys.readouterr().err
    assert main(["bank", "query", str(tmp_path / "b"), "x", "--set", "min_reward=0"]) == 2
    assert "fixed when the bank is built" in capsys.readouterr().err
    assert main(["bank", "query", str(tmp_path / "b"), "anything"]) == 0
    assert "no experiences found" in capsys.readouterr().out


def test_query_and_add_open_a_bank_built_with_the_hashing_embedder(tmp_path, capsys):
    """A bank a train config built with ``bank.embedder=hashing`` records that in its manifest; the CLI
    embeds its queries and new entries the same way (no model, the saved dimension)."""
    from harness.learners.privileged import HashingEmbedder
    from lopd.bank import BankConfig, ExperienceBank

    eps = task_episodes()
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_traces(first, eps[:3])
    write_traces(second, eps[3:])
    out = tmp_path / "bank"
    ExperienceBank.build([first], config=BankConfig(embed_text="task"), embedder=HashingEmbedder(dim=64)).save(out)
    own = eps[0].task_id
    assert main(["bank", "query", str(out), TASKS[own][0], "-k", "1", "--json", "--include-self"]) == 0
    (hit,) = json.loads(capsys.readouterr().out)
    assert hit["task_id"] == own and hit["score"] > 0.99
    assert main(["bank", "add", str(out), "--traces", str(second)]) == 0
    assert "now holds" in capsys.readouterr().out
    assert main(["bank", "stats", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dim"] == 64
