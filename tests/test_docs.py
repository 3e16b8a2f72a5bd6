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


def _options(parser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings if o.startswith("--")} - {"--help"}


def test_eval_synopsis_names_every_option_of_the_parser():
    from harness.cli import build_parser

    eval_parser = build_parser()._subparsers._group_actions[0].choices["eval"]
    synopsis = re.search(r"```\n(lopd eval .*?)```", (ROOT / "docs/EVAL.md").read_text(), re.S).group(1)
    assert set(re.findall(r"--[a-z][\w-]*", synopsis)) == _options(eval_parser)
    assert "hf|vllm|sglang" in synopsis  # every engine's choice


def _spans(text: str, needle: str) -> list[tuple[int, str]]:
    """(offset, code) of each inline code span that holds ``needle`` (fences' triple backticks left out)."""
    return [(m.start(), m.group(1)) for m in re.finditer(r"(?<!`)`([^`]+)`(?!`)", text) if needle in m.group(1)]


def _section(text: str, at: int) -> str:
    return text[:at].rsplit("\n## ", 1)[-1].split("\n", 1)[0]


RECORDS = {"benchmarks/compare.py": "Comparisons on earlier bases", "lopd pretrain": "Building the micro-world base"}
"""docs/MICRO.md's sections of records: commands kept as they ran, whose opening note names what the
code of today rejects."""


def test_compare_commands_use_todays_flags_or_are_records_that_say_so():
    import benchmarks.compare as compare

    known = _options(compare.build_parser())
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text()
        for at, code in _spans(text, "benchmarks/compare.py"):
            old = sorted(set(re.findall(r"(?<![\w-])--[a-z][\w-]*", code)) - known)
            if not old:
                continue
            section = _section(text, at)
            assert doc.name == "MICRO.md" and section.startswith(RECORDS["benchmarks/compare.py"]), (
                f"{doc.name} ({section}): `{code}` uses flags compare.py rejects: {old}")
            note = text.split("\n## " + section, 1)[1].split("\n\n", 2)[1]
            assert all(f"`{flag}`" in note for flag in old), f"the records note of {section} misses {old}"


def test_pretrain_overrides_are_valid_or_records_that_say_so():
    from harness.basemodel.config import BaseModelConfig
    from harness.config import load_config

    text = (ROOT / "docs/MICRO.md").read_text()
    note = text.split("\n## " + RECORDS["lopd pretrain"], 1)[1].split("\n\n", 2)[1]
    fields = set(BaseModelConfig.__dataclass_fields__)
    for at, code in _spans(text, "="):  # a command, or a table cell of overrides
        words = code.split()
        if "pretrain" in words:
            words = words[words.index("pretrain") + 1:]
        elif not all("=" in w for w in words):
            continue
        for kv in words:
            key, _, value = kv.partition("=")
            if key.split(".")[0] not in fields or not value or re.fullmatch(r"[A-Z]+|<.*>|\$\w+", value):
                continue  # not a base-model override, or a placeholder (N, <dir>, $B)
            try:
                load_config(BaseModelConfig, None, [kv])
            except (ValueError, TypeError) as e:
                section = _section(text, at)
                assert section.startswith(RECORDS["lopd pretrain"]) and f"`{kv}`" in note, (
                    f"MICRO.md ({section}): `{kv}` is refused today ({e}) and no records note names it")
