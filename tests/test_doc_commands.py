"""Every shell command README.md and docs/*.md show, run for real, so the docs cannot drift from the code.

A command is a line of a fenced shell block (```bash, ```sh, or an untagged block whose first line starts
with a program named in PROGRAMS), continuation lines joined and comments cut. The commands run in
document order in one working copy under tmp (links to the checkout's files; what they write, runs/ and
models/, lands there, never in the checkout), so a later command reads what an earlier one wrote: the
README's `lopd train harness/configs/lopd.yaml` is what docs/EVAL.md's `lopd export runs/lopd` exports.

The tables name commands by the start of their words as the docs show them (the longest match wins):
SHRINK how a long one runs here, SKIP why one cannot, NEEDS what must have run first, SLOW the ones over
~20 s, SERVERS the ones that serve until stopped (run on a free port until /health answers, then
stopped). An entry that matches no command fails `test_every_table_entry_names_a_command`, so none outlives
the command it was written for.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from envs.data import data_dir, has_data

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PROGRAMS = ("lopd", "python", "python3", "python3.11", "make", "pip", "torchrun", "huggingface-cli", "export")


@dataclass(frozen=True)
class Shrink:
    """The same command with less work: ``flags`` replace the values of those flags, ``extra`` words follow
    (a KEY=VALUE there wins over the config's, as the last value of a key does)."""

    extra: tuple[str, ...] = ()
    flags: dict[str, str] = field(default_factory=dict)


TINY_COMPOSER = ("bank.embedder=hashing", "lopd.composer.qformer.n_latents=4", "lopd.composer.qformer.depth=2")
TINY_TRAIN = ("generations=4", "rollouts_per_step=4", "eval.max_tasks=2", "log.progress=false")  # one step
TINY_EVAL = Shrink(("--limit", "2"), {"--n-samples": "1"})
TINY_DRY_RUN = ("model.dtype=float32", "rollouts_per_step=1", "sampling.max_new_tokens=8", "rollout.max_turns=1",
                "model.random_shape={hidden_size: 64, intermediate_size: 128, num_attention_heads: 4, "
                "num_key_value_heads: 2, head_dim: 16, vocab_size: 2048}")  # Qwen3-4B's 2,560 x 151,936: minutes

SHRINK: dict[str, Shrink] = {
    "lopd train harness/configs/grpo.yaml": Shrink(TINY_TRAIN),  # 640 generations, 120 eval tasks
    "lopd train harness/configs/grpo.yaml env.id=mypkg:lopd/todo-v0": Shrink(TINY_TRAIN),
    "lopd prepare harness/configs/lopd.yaml": Shrink(  # 600 bank and 600 cold-start episodes, 200 steps
        (*TINY_COMPOSER, "lopd.coldstart.batch_size=2", "log.progress=false",
         "--bank-tasks", "16", "--coldstart-tasks", "16", "--coldstart-steps", "2")),
    "lopd train harness/configs/lopd.yaml": Shrink((*TINY_COMPOSER, *TINY_TRAIN)),  # the composer prepare made
    "lopd eval --env micro-v0 --split eval --model micro:pinned": TINY_EVAL,  # 120 tasks x 4 samples
    "lopd train harness/configs/paper/": Shrink(TINY_DRY_RUN),  # a --dry-run at Qwen3-4B's width, 2 of 16k tokens
    "lopd eval --env micro-v0 --split eval --model models/lopd-student": TINY_EVAL,
}

GPU = "needs CUDA GPUs (docs/GPU.md); the CPU paths it shares are tested on the tiny models"
SKIP: dict[str, str] = {
    "make demo": "the whole demo, 64 generations of two learners (~7 min); tests/harness/experiments/test_demo.py "
                 "runs its stages shrunk",
    "make test": "the test suite itself (recursion)",
    "export LOPD_DATA_DIR=/path/to/data": "a placeholder path; the suite reads $LOPD_DATA_DIR or ../shared/data",
    "python benchmarks/compare.py --protocol": "~5 CPU-hours; tests/benchmarks/test_compare.py runs its stages on "
                                              "a shrunk protocol",
    "make vllm": "builds .venv-vllm from the package registry (~3 min); .ci/run builds it before the tests",
    "lopd train harness/configs/grpo.yaml engine.kind=vllm": "starts its own CPU vLLM server (about a minute); "
                                                            "tests/harness/engines cover the path with one server",
    "lopd eval --env lopd/shop-v0 --model harness/pinned_base --engine vllm": "starts its own CPU vLLM server; "
                                                                             "tests/harness/engines cover it",
    "lopd eval --env ID[,ID...]": "the synopsis, not a command; tests/test_docs.py checks it against the parser",
    "lopd score bfcl-v3 --results DIR": "a synopsis with placeholders (DIR, [...])",
    "python3.11 -m venv /tmp/bfcl_official": "BFCL's official checker venv, outside the project",
    "/tmp/bfcl_official/bin/pip install": "installs the official checker from the registry, outside the project",
    ".venv/bin/python benchmarks/bfcl_official_agreement.py": "needs the official checker's venv above",
    ".venv/bin/python benchmarks/bench_bfcl_verifier.py": "a benchmark against the official checker's venv above",
    "lopd eval --env envscaler-v0 --model /models/Qwen3-8B --engine sglang": "Qwen3-8B on an SGLang server: " + GPU,
    "CUDA_VISIBLE_DEVICES=": GPU,
    "torchrun --nproc_per_node 8": GPU,
    "python -m sglang.launch_server": GPU,
    "python benchmarks/gpu_smoke.py": GPU + "; tests/benchmarks/test_gpu_smoke.py runs its checks on CPU",
    "VLLM_SERVER_DEV_MODE=1 PYTHONPATH=harness/engines/worker_ext python -m vllm": GPU,
    "pip install -e .[dev]": "installs the project; `make venv` did that for this suite",
    "pip install sglang[all]": "SGLang's CUDA build: " + GPU,
    "huggingface-cli download": "downloads an 8B model from the hub",
}

NEEDS: dict[str, tuple[str, ...]] = {
    "lopd train harness/configs/lopd.yaml": ("lopd prepare harness/configs/lopd.yaml",),
    "lopd export runs/lopd": ("lopd train harness/configs/lopd.yaml",),
    "lopd eval --env micro-v0 --split eval --model models/lopd-student": ("lopd export runs/lopd",),
    "lopd traces export runs/eval-micro-base": ("lopd eval --env micro-v0 --split eval --model micro:pinned",),
    "lopd stats runs/hf/eval-micro-base": (
        "lopd traces export runs/eval-micro-base --out runs/hf/eval-micro-base --format hf",
        "lopd traces export runs/eval-micro-base --out runs/hf/eval-micro-base.jsonl"),
    "lopd traces import runs/hf/eval-micro-base": (
        "lopd traces export runs/eval-micro-base --out runs/hf/eval-micro-base --format hf",),
    "lopd stats runs/eval-micro-base/traces.jsonl": (
        "lopd eval --env micro-v0 --split eval --model micro:pinned",
        "lopd eval --env micro-v0 --split eval --model models/lopd-student"),
}

SLOW: set[str] = {  # prepare and LOPD's training take 20-25 s here, and what reads their output waits for them
    "lopd prepare harness/configs/lopd.yaml", "lopd train harness/configs/lopd.yaml", "lopd export runs/lopd",
    "lopd eval --env micro-v0 --split eval --model models/lopd-student", "lopd stats runs/eval-micro-base",
    "lopd train harness/configs/paper/",
}

SERVERS: dict[str, str] = {".venv/bin/lopd serve lopd/": "--port"}
"""Commands that serve until stopped -> the flag whose value, their port, becomes a free one here."""

PACKAGES: dict[str, str] = {
    "lopd eval --env mypkg:lopd/todo-v0": "plain",
    "lopd train harness/configs/grpo.yaml env.id=mypkg:lopd/todo-v0": "plain",
    "lopd eval --env lopd/todo-v0": "installed",  # declared in the lopd_gym.envs entry-point group
}
"""Commands that read the reader's own package, ``mypkg`` (README, "Add an environment"): the folder of
``work/_pkgs`` put on their PYTHONPATH, holding it as imported (plain) or as installed (dist-info)."""

MYPKG = {
    "__init__.py": "from mypkg import registration  # noqa: F401  (registers lopd/todo-v0)\n",
    "registration.py": 'from envs.registry import register_env\n\nregister_env("lopd/todo-v0", "mypkg.env:TodoEnv")\n',
    "env.py": (ROOT / "tests" / "data" / "todo_env.py").read_text(),  # the same env as tests/envs/
}


def _write_packages(root: Path) -> None:
    for kind in ("plain", "installed"):
        (root / kind / "mypkg").mkdir(parents=True)
        for name, text in MYPKG.items():
            (root / kind / "mypkg" / name).write_text(text)
    info = root / "installed" / "mypkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mypkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[lopd_gym.envs]\ntodo = mypkg.registration\n")

DATA = {"bfcl-v3": "bfcl_v3", "acebench": "acebench", "envscaler": "envscaler", "evalplus": "evalplus",
        "livecodebench": "livecodebench"}
"""Env id fragment -> the benchmark data folder a command playing it needs."""


@dataclass(frozen=True)
class Command:
    doc: str
    line: int
    words: tuple[str, ...]

    @property
    def text(self) -> str:
        return " ".join(self.words)

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.text}"


def _program(words: list[str]) -> str:
    rest = [w for w in words if not re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", w)]  # leading VAR=value
    return rest[0] if rest else ""


def _is_shell(lang: str, lines: list[str]) -> bool:
    if lang in ("bash", "sh", "shell", "console"):
        return True
    first = next((ln for ln in lines if ln.strip()), "")
    words = first.split()
    return lang == "" and bool(words) and (_program(words) in PROGRAMS or "/bin/" in _program(words))


def doc_commands() -> list[Command]:
    """Every command of every fenced shell block, in document order."""
    out = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
            lines = m.group(2).splitlines()
            if not _is_shell(m.group(1), lines):
                continue
            first = text.count("\n", 0, m.start()) + 2
            logical: list[tuple[int, str]] = []  # (line number, text): "\\" or an indented line continues
            for i, line in enumerate(lines):
                if logical and (logical[-1][1].endswith("\\") or line[:1].isspace() and logical[-1][1].strip()):
                    logical[-1] = (logical[-1][0], logical[-1][1].removesuffix("\\") + " " + line)
                else:
                    logical.append((first + i, line))
            for n, line in logical:
                words = shlex.split(line, comments=True)
                if words:
                    out.append(Command(str(path.relative_to(ROOT)), n, tuple(words)))
    return out


COMMANDS = doc_commands()


def _entry(table: dict, cmd: Command):
    keys = [k for k in table if cmd.text.startswith(k)]
    return table[max(keys, key=len)] if keys else None


def _argv(cmd: Command, bin_dir: Path) -> tuple[list[str], dict[str, str]]:
    """(argv, extra env) of a command as it runs here: this interpreter, shrunk, leading VAR=value as env."""
    words, env = list(cmd.words), {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    shrink = _entry(SHRINK, cmd) or Shrink()
    for i, w in enumerate(words[:-1]):
        if w in shrink.flags:
            words[i + 1] = shrink.flags[w]
    words += shrink.extra
    if words[0] in ("python", "python3", ".venv/bin/python"):
        words[0] = sys.executable
    elif words[0] == "lopd":
        lopd = bin_dir / "lopd"
        words[:1] = [str(lopd)] if lopd.exists() else [sys.executable, "-m", "harness"]
    return words, env


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A working copy: links to the checkout's entries (not its outputs), so the docs' relative paths resolve
    and what the commands write stays here."""
    wc = tmp_path_factory.mktemp("doc-commands")
    for entry in ROOT.iterdir():
        if entry.name not in (".git", "runs", "models", ".pytest_cache"):
            (wc / entry.name).symlink_to(entry)
    _write_packages(wc / "_pkgs")
    return wc


RESULTS: dict[Command, str | None] = {}
"""What ran in this session's working copy: None when it passed, else the failure."""


def _run(cmd: Command, work: Path) -> str | None:
    if cmd in RESULTS:
        return RESULTS[cmd]
    for need in _entry(NEEDS, cmd) or ():
        first = next(c for c in COMMANDS if c.text.startswith(need))
        if _run(first, work) is not None:
            RESULTS[cmd] = f"{first} (needed first) failed"
            return RESULTS[cmd]
    argv, extra = _argv(cmd, Path(sys.executable).parent)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "LOPD_DATA_DIR": str(data_dir()), **extra}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if _entry(PACKAGES, cmd):
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(work / "_pkgs" / _entry(PACKAGES, cmd)),
                                                          env.get("PYTHONPATH")]))
    if _entry(SERVERS, cmd):
        RESULTS[cmd] = _serve(cmd, argv, env, work)
        return RESULTS[cmd]
    p = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    RESULTS[cmd] = None if p.returncode == 0 else (
        f"{cmd}\nran as: {shlex.join(argv)}\nexit {p.returncode}\n--- stdout\n{p.stdout[-3000:]}\n"
        f"--- stderr\n{p.stderr[-3000:]}")
    return RESULTS[cmd]


def _serve(cmd: Command, argv: list[str], env: dict[str, str], work: Path) -> str | None:
    """Start a server command on a free port; None once it answers /health, else why it did not."""
    from envs.serving.spawn import ServeError, free_port, running

    port, flag = str(free_port()), _entry(SERVERS, cmd)
    argv = [port if i and argv[i - 1] == flag else w for i, w in enumerate(argv)]
    try:
        with running(argv, f"http://127.0.0.1:{port}", cwd=work, env=env):
            return None
    except ServeError as e:
        return f"{cmd}\nran as: {shlex.join(argv)}\n{e}"


def _param(cmd: Command):
    marks = [pytest.mark.xdist_group("doc_commands")]  # one worker, in document order: later ones read earlier
    if _entry({k: True for k in SLOW}, cmd):
        marks.append(pytest.mark.slow)
    return pytest.param(cmd, id=f"{cmd.doc}:{cmd.line}", marks=marks)


@pytest.mark.parametrize("cmd", [_param(c) for c in COMMANDS])
def test_doc_command_runs(cmd: Command, work: Path):
    reason = _entry(SKIP, cmd)
    if reason:
        pytest.skip(reason)
    missing = sorted({folder for part, folder in DATA.items() if part in cmd.text and not has_data(folder)})
    if missing:
        pytest.skip(f"benchmark data {missing} not under {data_dir()} (set LOPD_DATA_DIR)")
    failure = _run(cmd, work)
    assert failure is None, failure


def test_every_table_entry_names_a_command():
    texts = [c.text for c in COMMANDS]
    tables = {"SHRINK": SHRINK, "SKIP": SKIP, "NEEDS": NEEDS, "SLOW": SLOW, "PACKAGES": PACKAGES,
              "SERVERS": SERVERS,
              "NEEDS (needed)": {n: 1 for needs in NEEDS.values() for n in needs}}
    stale = [f"{name}: {key!r}" for name, table in tables.items() for key in table
             if not any(t.startswith(key) for t in texts)]
    assert not stale, f"entries for commands the docs no longer show: {stale}"
    assert len(COMMANDS) > 20 and any(c.doc == "README.md" for c in COMMANDS)


def test_commands_are_found_in_every_kind_of_block():
    texts = [c.text for c in COMMANDS]
    assert "make demo" in texts  # ```bash
    assert any(t.startswith("lopd stats runs/eval-micro-base") for t in texts)  # untagged, lopd first
    assert any(t.startswith("torchrun") and "engine.sync_dir=/shared/sync" in t for t in texts)  # joined lines
    assert not any("─►" in t for t in texts)  # ARCHITECTURE.md's diagrams are not commands
