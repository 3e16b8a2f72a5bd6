"""Every source file compiles without a warning, also the modules no test imports.

Compile-time warnings (an invalid escape such as ``"\\["``: a DeprecationWarning to Python 3.11, a
SyntaxWarning from 3.12, an error later) fire only when a file is compiled, so pytest's
``filterwarnings`` sees them in the modules a run imports and only when ``__pycache__`` is stale; this
compiles them all, every time.
"""
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("envs", "harness", "lopd", "benchmarks", "tests")


def test_every_source_compiles_without_a_warning():
    paths = sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))
    assert len(paths) > 100
    bad = []
    for path in paths:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a compile-time warning is then raised as a SyntaxError
            try:
                compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
            except (SyntaxError, Warning) as e:
                bad.append(f"{path.relative_to(ROOT)}:{getattr(e, 'lineno', '?')}: {getattr(e, 'msg', e)}")
    assert not bad, "sources that do not compile cleanly:\n" + "\n".join(bad)
