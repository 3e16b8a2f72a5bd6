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
