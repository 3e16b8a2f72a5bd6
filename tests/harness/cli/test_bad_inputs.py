"""Ordinary mistakes at every ``lopd`` command: exit 2, a message naming the culprit, no traceback, and all
of it before a model, a base or a pipeline loads (the loaders are replaced by ones that raise)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from harness.cli import main

E = "--env lopd/micro-v0 --model micro:pinned --out {d}/e"  # a valid eval, spoilt by one flag per case
LOPD = "harness/configs/lopd.yaml"

CASES = [
    # train: the config file
    ("train {d}/adir", "adir is a directory"),
    ("train {d}/missing.yaml", "missing.yaml: no such config file"),
    ("train {d}/bin.yaml", "bin.yaml is not a UTF-8 text"),
    ("train {d}/huge.yaml", "huge.yaml is 4.8 MiB"),
    ("train {d}/list.yaml", "top level must be a mapping"),
    ("train {d}/bad.yaml", "invalid YAML"),
    ("train {d}/badenv.yaml", "lopd/nope-v0"),
    ("train --example nope", "no example config 'nope'"),
    ("train {d}/empty.yaml --example grpo", "not both"),
    # train: keys, types, ranges, names
    ("train nope=1", "unknown config key(s): nope"),
    ("train optim.lr=fast", "optim.lr: expected a number"),
    ("train generations=[1]", "generations: expected an integer"),
    ("train learner=nope", "unknown learner 'nope'"),
    ("train model.device=cdua", "model.device: 'cdua' is not cpu, cuda"),
    ("train model.dtype=fp16", "model.dtype: 'fp16' is not one of"),
    ("train distributed.backend=mpi", "distributed.backend: 'mpi'"),
    ("train generations=0", "generations: 0 is out of range (allowed: >= 1)"),
    ("train rollouts_per_step=0", "rollouts_per_step: 0 is out of range"),
    ("train group_size=0", "group_size: 0 is out of range"),
    ("train eval.every_generations=-1", "eval.every_generations: -1 is out of range (allowed: >= 0)"),
    ("train eval.batch_size=0", "eval.batch_size: 0 is out of range"),
    ("train sampling.temperature=-1", "sampling.temperature: -1.0 is out of range (allowed: >= 0)"),
    ("train sampling.top_p=0", "sampling.top_p: 0.0 is out of range (allowed: > 0 and <= 1)"),
    ("train sampling.max_new_tokens=0", "sampling.max_new_tokens: 0"),
    ("train rollout.max_turns=0", "rollout.max_turns: 0"),
    ("train checkpoint.keep=0", "checkpoint.keep: 0"),
    ("train engine.port=70000", "engine.port: 70000 is out of range (allowed: >= 1 and <= 65535)"),
    ("train optim.lr=0", "optim.lr: 0.0 is out of range (allowed: > 0)"),
    ("train env.max_train_tasks=0", "env.max_train_tasks: 0"),
    ("train harness/configs/grpo.yaml grpo.clip_low=-1", "grpo.clip_low: -1.0"),
    (f"train {LOPD} lopd.coldstart.steps=0", "lopd.coldstart.steps: 0"),
    (f"train {LOPD} lopd.composer.lora.dropout=1", "lopd.composer.lora.dropout: 1.0 is out of range"),
    ("train learner=lopd lopd.n_retrieved=0", "lopd.n_retrieved: 0"),
    ("train learner=lopd lopd.coldstart.min_reward=1.5", "lopd.coldstart.min_reward: 1.5 is out of range"),
    ("train bank.config.min_reward=2", "min_reward must lie in [0, 1]"),
    # train: what the run meets (env, model, run_dir), still before the model loads
    ("train run_dir={d}/afile", "run_dir: {d}/afile is an existing file"),
    ("train run_dir={d}/afile/sub", "{d}/afile is a file"),
    ("train env.id=lopd/nope-v0 run_dir={d}/r", "unknown env 'lopd/nope-v0'"),
    ("train 'env.kwargs={{bogus: 1}}' run_dir={d}/r", "takes no keyword argument 'bogus'; it takes:"),
    ("train model.path={d}/adir run_dir={d}/r", "adir is not a model directory"),
    ("train 'model.random_shape={{hidden_size: 8}}' run_dir={d}/r", "applies only to `lopd train --dry-run`"),
    # train --dry-run: the same checks, and the model it would build at random
    ("train --dry-run model.num_hidden_layers=0", "model.num_hidden_layers: 0 is out of range (allowed: >= 1)"),
    ("train --dry-run model.num_hidden_layers=two", "model.num_hidden_layers: expected an integer"),
    ("train --dry-run rollouts_per_step=-1", "rollouts_per_step: -1 is out of range"),
    ("train --dry-run nope=1", "unknown config key(s): nope"),
    ("train --dry-run model.random_shape=[1]", "model.random_shape"),
    ("train --dry-run model.path={d}/nothere", "not a model whose shape is known offline (Qwen/Qwen3-4B"),
    ("train --dry-run 'model.random_shape={{hidden_size: 8}}'", "model.random_shape applies to a model built with random"),
    # demo
    ("demo generations=-1", "generations: -1 is out of range"),
    ("demo jobs=0", "jobs: 0"),
    ("demo eval_split=test", "eval_split: 'test' is not one of"),
    ("demo base.preset=nope", "base.preset: 'nope' is not one of 1m"),
    ("demo --seeds -1", "seeds[0]: -1"),
    ("demo --config {d}/adir", "adir is a directory"),
    ("demo --config {d}/list.yaml", "top level must be a mapping"),
    ("demo --out {d}/afile", "--out: {d}/afile is an existing file"),
    ("demo --out {d}/dm --learners grpo nope", "no example config 'nope'"),
    # pretrain
    ("pretrain n_plain=-5", "n_plain: -5 is out of range (allowed: >= 0)"),
    ("pretrain preset=nope", "preset: 'nope' is not one of 1m, 5m"),
    ("pretrain prompt=long", "prompt: 'long' is not one of"),
    ("pretrain rename_fraction=2", "rename_fraction: 2.0 is out of range (allowed: >= 0 and <= 1)"),
    ("pretrain pretrain.epochs=0", "pretrain.epochs: 0.0"),
    ("pretrain --samples 0", "argument --samples: 0 is out of range (allowed: >= 1)"),
    ("pretrain --eval-tasks -1", "argument --eval-tasks: -1"),
    ("pretrain --temperature -1", "argument --temperature: -1.0"),
    ("pretrain --config {d}/bin.yaml", "bin.yaml is not a UTF-8 text"),
    ("pretrain --json {d}/adir", "--json: {d}/adir is an existing folder"),
    ("pretrain --cache-dir {d}/afile", "--cache-dir: {d}/afile is an existing file"),
    ("pretrain --base {d}/adir n_plain=1", "--base measures a built base as it is"),
    # prepare (KEY=VALUE after a flag is an override, as for lopd train)
    (f"prepare {LOPD} --bank-tasks 0", "argument --bank-tasks: 0 is out of range"),
    (f"prepare {LOPD} --coldstart-tasks 0", "argument --coldstart-tasks: 0"),
    (f"prepare {LOPD} --coldstart-steps 0", "argument --coldstart-steps: 0"),
    (f"prepare {LOPD} --bank-tasks 5 generations=-1", "generations: -1 is out of range"),
    (f"prepare {LOPD} --force lopd.coldstart.steps=0", "lopd.coldstart.steps: 0"),
    ("prepare harness/configs/grpo.yaml", "learner grpo reads no bank"),
    ("prepare {d}/adir", "adir is a directory"),
    ("prepare {d}/huge.yaml", "huge.yaml is 4.8 MiB"),
    # coldstart
    (f"coldstart {LOPD} --traces {{d}}/missing.jsonl", "--traces: {d}/missing.jsonl: no such file"),
    (f"coldstart {LOPD} --traces {{d}}/adir", "--traces: {d}/adir is a directory"),
    (f"coldstart {LOPD} --traces {{d}}/t.jsonl --out {{d}}/adir", "--out: {d}/adir is an existing folder"),
    (f"coldstart {LOPD} --out {{d}}/c.pt --traces {{d}}/t.jsonl lopd.coldstart.steps=0",
     "lopd.coldstart.steps: 0"),
    (f"coldstart {LOPD} --traces {{d}}/t.jsonl --out {{d}}/c.pt generations=-1", "generations: -1"),
    ("coldstart {d}/bin.yaml --traces {d}/t.jsonl", "bin.yaml is not a UTF-8 text"),
    # eval
    (f"eval {E} --batch-size 0", "argument --batch-size: 0 is out of range (allowed: >= 1)"),
    (f"eval {E} --max-turns 0", "argument --max-turns: 0"),
    (f"eval {E} --n-samples 0", "argument --n-samples: 0"),
    (f"eval {E} --max-new-tokens 0", "argument --max-new-tokens: 0"),
    (f"eval {E} --concurrency 0", "argument --concurrency: 0"),
    (f"eval {E} --limit -1", "argument --limit: -1"),
    (f"eval {E} --top-p 2", "argument --top-p: 2.0 is out of range (allowed: > 0 and <= 1)"),
    (f"eval {E} --temperature nan", "argument --temperature: nan"),
    (f"eval {E} --temperature warm", "argument --temperature: expected a number"),
    (f"eval {E} --device cdua", "argument --device: 'cdua' is not cpu, cuda"),
    (f"eval {E} --dtype fp16", "argument --dtype: 'fp16' is not one of"),
    (f"eval {E} --server-wait 0", "argument --server-wait: 0.0"),
    (f"eval {E} --launch -1", "argument --launch: -1"),
    (f"eval {E} --engine vllm --server-url ftp://x", "must start with http://"),
    (f"eval {E} --env-kwargs notjson", "--env-kwargs wants JSON or ID=JSON"),
    (f"eval {E} --env-kwargs '{{{{\"bogus\": 1}}}}'", "lopd/micro-v0 takes no keyword argument 'bogus'"),
    (f"eval {E} --template-kwargs '[1]'", "--template-kwargs must be a JSON object"),
    (f"eval {E} --template-kwargs ''", "--template-kwargs is not JSON"),
    ("eval --env lopd/nope-v0 --model micro:pinned --out {d}/e", "unknown env 'lopd/nope-v0'"),
    ("eval --env lopd/micro-v0 --model micro:pinned --out {d}/afile", "--out: {d}/afile is an existing file"),
    # export
    ("export {d}/adir --out {d}/x", "{d}/adir holds no checkpoint with a student"),
    # bank
    ("bank build --traces {d}/missing.jsonl --out {d}/b", "--traces: {d}/missing.jsonl: no such file"),
    ("bank build --traces {d}/t.jsonl --out {d}/afile", "--out: {d}/afile is an existing file"),
    ("bank build --traces {d}/t.jsonl --out {d}/b --set top_k=0", "top_k must be >= 1"),
    ("bank build --traces {d}/t.jsonl --out {d}/b --set nope=1", "unknown config key(s): nope"),
    ("bank build --traces {d}/t.jsonl --out {d}/b --config {d}/bin.yaml", "bin.yaml is not a UTF-8 text"),
    ("bank stats {d}/adir", "{d}/adir is not an experience bank"),
    ("bank query {d}/missing task", "no bank at {d}/missing"),
    ("bank add {d}/b --traces {d}/adir", "--traces: {d}/adir is a directory"),
    # stats
    ("stats {d}/missing.jsonl", "missing.jsonl"),
    ("stats {d}/adir", "{d}/adir is a directory without a traces.jsonl"),
    ("stats {d}/bin.yaml", "bin.yaml:1"),
    ("stats {d}/empty.yaml", "no episodes found in {d}/empty.yaml"),
    ("stats {d}/t.jsonl --workers 0", "argument --workers: 0 is out of range"),
    ("stats {d}/t.jsonl --out {d}/adir", "--out: {d}/adir is an existing folder"),
    ("stats {d}/t.jsonl --plot {d}/afile", "--plot: {d}/afile is an existing file"),
    ("stats {d}/t.jsonl --metrics {d}/t.jsonl", "--metrics needs --plot"),
    # traces
    ("traces export {d}/missing.jsonl --out {d}/x", "{d}/missing.jsonl"),
    ("traces export {d}/adir --out {d}/x", "{d}/adir is a directory without a traces.jsonl"),
    ("traces export {d}/t.jsonl --out {d}/afile", "--out: {d}/afile is an existing file"),
    ("traces export {d}/t.jsonl --out {d}/adir --format openai-jsonl", "--out: {d}/adir is an existing folder"),
    ("traces export {d}/t.jsonl --out {d}/x", "t.jsonl:1: ValueError: unknown trace version None"),
    ("traces export {d}/t.jsonl --out {d}/x --format parquet", "invalid choice: 'parquet'"),
    ("traces import {d}/missing --out {d}/x.jsonl", "{d}/missing: no such file or folder"),
    ("traces import {d}/adir --out {d}/x.jsonl", "{d}/adir is not a dataset of rows"),
    ("traces import {d}/t.jsonl --out {d}/x.jsonl", "no 'messages' column"),
    ("traces import {d}/t.jsonl --out {d}/afile", "--out {d}/afile exists; pass --append"),
    # score
    ("score bfcl-v3 --results {d}/missing", "results folder not found: {d}/missing"),
    ("score acebench --results {d}/afile", "--results {d}/afile is not a folder"),
    ("score evalplus --dataset humaneval --samples {d}/missing.jsonl", "missing.jsonl"),
    ("score evalplus --dataset humaneval --samples {d}/bin.yaml", "bin.yaml:1"),
    ("score livecodebench --problems {d}/missing --samples {d}/t.jsonl", "no LiveCodeBench problems file"),
    ("score evalplus --dataset humaneval --samples {d}/t.jsonl --workers 0", "argument --workers: 0"),
]


class Loaded(Exception):
    """A model, base, pipeline or cold start was started: the mistake was caught too late."""


def _loaded(*args, **kwargs):
    raise Loaded("validation came after the work started")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    (d / "adir").mkdir()
    (d / "afile").write_text("x\n")
    (d / "empty.yaml").write_text("")
    (d / "bin.yaml").write_bytes(b"\x00\x01\xff\xfe")
    (d / "huge.yaml").write_text("a" * 5_000_000)  # one 5 MB line
    (d / "list.yaml").write_text("- a\n- b\n")
    (d / "bad.yaml").write_text("a: [1, 2\n")
    (d / "badenv.yaml").write_text("env: {id: lopd/nope-v0}\n")
    (d / "t.jsonl").write_text('{"a": 1}\n')
    return d


@pytest.fixture(autouse=True)
def no_work(monkeypatch, files):
    """Replace everything that loads a model or starts a long stage by a function that raises."""
    import harness.basemodel.build
    import harness.experiments.demo
    import harness.models
    import harness.models.tiny
    import harness.prepare.stages
    import harness.training.coldstart

    class NoLoad:
        from_pretrained = staticmethod(_loaded)

    monkeypatch.setattr(harness.models.tiny, "AutoModelForCausalLM", NoLoad)
    monkeypatch.setattr(harness.models, "build_tiny_model", _loaded)
    for mod, name in [(harness.basemodel.build, "load_or_build_base"),
                      (harness.basemodel.build, "load_base_dir"), (harness.experiments.demo, "run_pipeline"),
                      (harness.prepare.stages, "base_stage"), (harness.training.coldstart, "run_coldstart")]:
        monkeypatch.setattr(mod, name, _loaded)
    monkeypatch.setenv("LOPD_CACHE_DIR", str(files / "cache"))
    root = os.getcwd()
    monkeypatch.chdir(files)  # runs/... defaults land in the temporary folder
    monkeypatch.setattr("sys.path", [root, *sys.path])
    return root


def _run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as e:  # argparse's own errors
        return e.code


IDS = [f"{line.split(' --')[0][:60]}#{i}" for i, (line, _) in enumerate(CASES)]


@pytest.mark.parametrize("line, culprit", CASES, ids=IDS)
def test_a_mistake_is_a_message_naming_it_with_exit_2(line, culprit, files, no_work, capsys):
    argv = shlex.split(line.format(d=files).replace("harness/configs/", f"{no_work}/harness/configs/"))
    rc = _run(argv)
    out = capsys.readouterr()
    text = out.out + out.err
    assert rc == 2, text
    assert culprit.format(d=files) in text
    assert "Traceback" not in text
    assert any(line.startswith(f"lopd {argv[0]}") for line in text.splitlines())  # `lopd CMD: error: ...`


def test_enough_cases_over_every_command():
    commands = {c[0].split()[0] for c in CASES}
    assert len(CASES) >= 60
    assert commands == {"train", "demo", "pretrain", "prepare", "coldstart", "eval", "export", "bank", "stats",
                        "score", "traces"}


def test_a_closed_pipe_is_quiet():
    """``lopd train --list-keys | head -1``: the reader leaves; no traceback, exit as a SIGPIPE'd process."""
    r, w = os.pipe()
    os.close(r)  # every write now fails with EPIPE
    try:
        p = subprocess.run([sys.executable, "-m", "harness", "train", "--list-keys"], stdout=w,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    assert p.returncode in (0, 141) and "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, p.stderr


@pytest.mark.parametrize("line", ["train generations=4 rollouts_per_step=4 run_dir={d}/ok",
                                  "eval --env lopd/micro-v0 --model micro:pinned --out {d}/ok-eval --limit 1",
                                  "pretrain --no-eval", "demo --out {d}/ok-demo"])
def test_the_guard_stops_valid_commands_at_the_load(line, files):
    """The cases above pass because they are refused before the load, not because nothing would load."""
    with pytest.raises(Loaded):
        main(shlex.split(line.format(d=files)))


@pytest.mark.parametrize("argv, overrides", [
    (["prepare", "c.yaml", "--bank-tasks", "5", "a=1", "b.c=2"], ["a=1", "b.c=2"]),
    (["coldstart", "c.yaml", "--out", "x.pt", "a=1", "--traces", "t.jsonl"], ["a=1"]),
    (["train", "c.yaml", "--example", "grpo", "a=1", "b.c=2"], ["a=1", "b.c=2"]),
])
def test_overrides_after_a_flag_are_overrides(argv, overrides):
    from harness.cli import _parse, build_parser

    args = _parse(build_parser(), argv)
    assert args.config == "c.yaml" and args.overrides == overrides


def test_a_stray_word_after_a_flag_is_still_refused(capsys):
    assert _run(["prepare", "c.yaml", "--force", "other.yaml"]) == 2
    assert "unrecognized arguments: other.yaml" in capsys.readouterr().err
