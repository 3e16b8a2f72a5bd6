"""What a benchmark's result records about its run: when, on what machine and software, by which command
(RESULTS.md quotes it beside the numbers).

    result["meta"] = run_meta(__file__, argv, threads=args.threads)
"""

from __future__ import annotations

import os
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_meta(script: str, argv: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """The date (UTC), machine, CPU count, load, Python, torch (when imported) and the command that reproduces
    the run (``argv``: its arguments; None: this process's), then ``extra``."""
    meta: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {cpu_model()}", "cpus": os.cpu_count(), "load_avg": os.getloadavg(),
        "python": platform.python_version(),
        "command": shlex.join(["python", f"benchmarks/{Path(script).name}",
                               *(sys.argv[1:] if argv is None else argv)])}
    if "torch" in sys.modules:
        meta["torch"] = sys.modules["torch"].__version__
    return meta | extra
