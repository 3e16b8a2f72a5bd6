"""``.venv-openenv``: the venv that runs ``lopd serve`` (OpenEnv's server package), overlaid on ours.

OpenEnv's server package imports fastmcp 3 unconditionally, which pins ``mcp < 2``; this project runs
on mcp 2.x. So the server runs in a second venv whose own site-packages come first (openenv's missing
dependencies, mcp 1.x among them) and ours after it, through a ``.pth`` file that calls
``site.addsitedir`` on our site-packages (so our own ``.pth`` files, the editable install among them,
are read too). pip in the overlay sees our packages as installed and adds only what is missing; it
never touches ours (they lie outside its environment).

``make openenv`` builds it; :func:`ensure_openenv_venv` builds it on first use (a file lock keeps two
builders apart; a marker file holding the requirement tells a finished build from one cut off halfway,
which is rebuilt). ``python -m envs.serving.venv`` builds it and prints the overlay's interpreter.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-openenv"
MARKER = VENV / ".installed"  # the Makefile's stamp too; holds the requirement it was built for
LOCK = ROOT / ".venv-openenv.lock"
REQUIREMENT = "openenv==0.10.0"
OVERLAY_PTH = "lopd_overlay.pth"
BUILD_TIMEOUT_S = 900


class OpenEnvVenvError(RuntimeError):
    """The overlay venv cannot be built; the message ends with pip's last lines."""


def openenv_python() -> Path:
    """The overlay's interpreter (whether or not it is built yet)."""
    return VENV / "bin" / "python"


def is_built() -> bool:
    return openenv_python().is_file() and MARKER.is_file() and MARKER.read_text().strip() == REQUIREMENT


def _base_python() -> str:
    """The interpreter our venv was made from: the overlay must share its version and ABI."""
    return getattr(sys, "_base_executable", None) or sys.executable


def _site_packages(prefix: Path) -> Path:
    return Path(sysconfig.get_path("purelib", vars={"base": str(prefix), "platbase": str(prefix)}))


def _tail(text: str, lines: int = 12) -> str:
    kept = [x for x in text.splitlines() if x.strip()]
    return "\n".join(kept[-lines:]) or "(no output)"


def _run(step: list[str], what: str) -> None:
    try:
        done = subprocess.run(step, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise OpenEnvVenvError(f"building {VENV.name}: {what} timed out after {BUILD_TIMEOUT_S} s") from None
    if done.returncode != 0:
        raise OpenEnvVenvError(f"building {VENV.name}: {what} exited {done.returncode} (try `make openenv`):\n"
                               + _tail(done.stderr or done.stdout))


def _build() -> None:
    shutil.rmtree(VENV, ignore_errors=True)
    ours = _site_packages(Path(sys.prefix))
    _run([_base_python(), "-m", "venv", str(VENV)], "python -m venv")
    # Before pip runs: pip must see our packages as installed, or it would install its own copies.
    pth = _site_packages(VENV) / OVERLAY_PTH
    pth.write_text(f'import site; site.addsitedir("{ours}")\n')
    py = str(openenv_python())
    _run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", REQUIREMENT], f"pip install {REQUIREMENT}")
    _run([py, "-c", "import openenv.core.env_server"], "importing openenv.core.env_server in the overlay")
    # Our venv keeps its mcp 2.x: the overlay's pip may only add to its own site-packages.
    _run([sys.executable, "-c", "import mcp.server.mcpserver"], f"importing mcp 2.x in {sys.prefix} afterwards")
    MARKER.write_text(REQUIREMENT + "\n")


def ensure_openenv_venv() -> Path:
    """The overlay's interpreter, building the overlay first when it is missing or half built. Raises
    :class:`OpenEnvVenvError` (naming ``make openenv``) when it cannot be built, e.g. without PyPI."""
    if is_built():
        return openenv_python()
    if Path(sys.prefix).resolve() == VENV.resolve():
        raise OpenEnvVenvError(f"{VENV} is half built; run `make openenv` from the project's venv")
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not is_built():  # else someone else built it while we waited
            _build()
    return openenv_python()


if __name__ == "__main__":
    try:
        print(ensure_openenv_venv())
    except OpenEnvVenvError as e:
        sys.exit(f"error: {e}")
