"""The README's worked example is the real file, character for character."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_example_is_the_shop_env():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Add an environment", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert block == (ROOT / "envs/examples/shop.py").read_text()
    assert len(block.splitlines()) <= 40


def test_readme_opens_with_the_two_commands():
    head = (ROOT / "README.md").read_text().split("\n## ", 1)[0]
    assert head.index("make demo") < head.index("make test")


def test_architecture_names_only_paths_that_exist():
    text = (ROOT / "docs/ARCHITECTURE.md").read_text()
    names = {t for t in re.findall(r"`([\w./-]+)`", text) if "/" in t and "..." not in t
             and not t.startswith("../")}  # outside the checkout (the data dir)
    names = {t for t in names if not re.fullmatch(r"lopd/[\w-]+-v\d+", t)}  # env ids, not paths
    packages = [ROOT / p for p in ("envs", "harness", "lopd", "benchmarks", "tests", "docs")]
    # A bare sub-folder name (`domains/`) may sit in any package; a rooted one must exist as written.
    missing = [t for t in sorted(names) if not (ROOT / t).exists()
               and not (t.count("/") == 1 and t.endswith("/") and any(any(p.rglob(t[:-1])) for p in packages))]
    assert names and not missing, f"docs/ARCHITECTURE.md names paths that do not exist: {missing}"
