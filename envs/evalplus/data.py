"""HumanEval+ v0.1.10 and MBPP+ v0.2.0 from the data dir, and their cached expected outputs.

Problems are loaded by evalplus 0.3.1's own loaders pointed at our files (the module-level
HUMANEVAL_OVERRIDE_PATH / MBPP_OVERRIDE_PATH they read), so MBPP+ inputs get evalplus's
``mbpp_deserialize_inputs``. Expected outputs are what evalplus's ``get_groundtruth`` computes: the
canonical solution run by ``evalplus.gen.util.trusted_exec`` on every input, timed. They are computed
per task on first use and cached under ``$LOPD_CACHE_DIR/evalplus/<dataset>-<md5 of the data file>/``
(default ``~/.cache/lopd``)::

    from envs.evalplus.data import load_problems, expected_outputs
    problems = load_problems("humaneval")            # 164 tasks
    gt = expected_outputs("humaneval", "HumanEval/0")  # {"base", "base_time", "plus", "plus_time"}
"""

from __future__ import annotations

import os
import pickle
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from envs.data import require_data

Dataset = Literal["humaneval", "mbpp"]
DATA_FILES = {"humaneval": "HumanEvalPlus.jsonl.gz", "mbpp": "MbppPlus.jsonl.gz"}
VERSIONS = {"humaneval": "v0.1.10", "mbpp": "v0.2.0"}
_load_lock = threading.Lock()
_gt_locks: dict[tuple[str, str], threading.Lock] = {}


def data_file(dataset: Dataset) -> Path:
    if dataset not in DATA_FILES:
        raise ValueError(f"unknown EvalPlus dataset {dataset!r}; use 'humaneval' or 'mbpp'")
    return require_data("evalplus", DATA_FILES[dataset])


def cache_root() -> Path:
    """``$LOPD_CACHE_DIR`` or ``~/.cache/lopd``."""
    env = os.environ.get("LOPD_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "lopd"


@lru_cache(maxsize=4)
def _load(dataset: Dataset, path: str) -> tuple[dict[str, dict[str, Any]], str]:
    with _load_lock:
        if dataset == "humaneval":
            import evalplus.data.humaneval as mod

            attr, get, get_hash = (
                "HUMANEVAL_OVERRIDE_PATH",
                mod.get_human_eval_plus,
                mod.get_human_eval_plus_hash,
            )
        else:
            import evalplus.data.mbpp as mod

            attr, get, get_hash = "MBPP_OVERRIDE_PATH", mod.get_mbpp_plus, mod.get_mbpp_plus_hash
        old = getattr(mod, attr)
        setattr(mod, attr, path)
        try:
            return get(), get_hash()
        finally:
            setattr(mod, attr, old)


def load_problems(dataset: Dataset) -> dict[str, dict[str, Any]]:
    """task_id -> evalplus problem dict (prompt, entry_point, canonical_solution, base_input, ...)."""
    return _load(dataset, str(data_file(dataset)))[0]


def dataset_hash(dataset: Dataset) -> str:
    """evalplus's hash of the data file (md5), which also keys its own ground-truth cache."""
    return _load(dataset, str(data_file(dataset)))[1]


def output_not_none(dataset: Dataset, entry_point: str) -> bool:
    """MBPP tasks whose expected output is only 'returned something not None'."""
    from evalplus.eval._special_oracle import MBPP_OUTPUT_NOT_NONE_TASKS

    return dataset == "mbpp" and entry_point in MBPP_OUTPUT_NOT_NONE_TASKS


def _cache_file(dataset: Dataset, task_id: str) -> Path:
    safe = task_id.replace("/", "_")
    return cache_root() / "evalplus" / f"{dataset}-{dataset_hash(dataset)}" / f"{safe}.pkl"


def expected_outputs(dataset: Dataset, task_id: str) -> dict[str, list]:
    """The oracle of one task (as evalplus's get_groundtruth): base, base_time, plus, plus_time."""
    problems = load_problems(dataset)
    if task_id not in problems:
        raise KeyError(f"{dataset} has no task {task_id!r}")
    path = _cache_file(dataset, task_id)
    with _load_lock:
        lock = _gt_locks.setdefault((dataset, task_id), threading.Lock())
    with lock:
        if path.exists():
            try:
                with open(path, "rb") as f:
                    return pickle.load(f)
            except (OSError, EOFError, pickle.UnpicklingError):
                path.unlink(missing_ok=True)  # a torn write: recompute
        oracle = compute_expected(dataset, problems[task_id])
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(oracle, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        return oracle


def compute_expected(dataset: Dataset, problem: dict[str, Any]) -> dict[str, list]:
    """Run the canonical solution like evalplus's get_groundtruth (trusted code, in this process)."""
    from evalplus.gen.util import trusted_exec

    code = problem["prompt"] + problem["canonical_solution"]
    nn = output_not_none(dataset, problem["entry_point"])
    oracle: dict[str, list] = {}
    for phase in ("base", "plus"):
        oracle[phase], oracle[f"{phase}_time"] = trusted_exec(
            code, problem[f"{phase}_input"], problem["entry_point"], record_time=True, output_not_none=nn
        )
    return oracle


def import_evalplus_groundtruth(dataset: Dataset) -> int:
    """Copy evalplus's own cached oracle (``~/.cache/evalplus/<md5>.pkl``, written by a previous
    ``evalplus.evaluate``) into our per-task cache, so both use the same expected outputs and, above
    all, the same reference times (time limits are 4x those). Returns the number of tasks copied."""
    from evalplus.data.utils import CACHE_DIR

    src = Path(CACHE_DIR) / f"{dataset_hash(dataset)}.pkl"
    if not src.exists():
        return 0
    with open(src, "rb") as f:
        oracle = pickle.load(f)
    problems = load_problems(dataset)
    n = 0
    for task_id, gt in oracle.items():
        if task_id in problems and all(k in gt for k in ("base", "base_time", "plus", "plus_time")):
            path = _cache_file(dataset, task_id)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as out:
                pickle.dump(
                    {k: gt[k] for k in ("base", "base_time", "plus", "plus_time")},
                    out,
                    protocol=pickle.HIGHEST_PROTOCOL,
                )
            os.replace(tmp, path)
            n += 1
    return n
