"""Imports point one way: no two modules import each other (even lazily, even for typing), and a module of
harness/ imports only from its own layer or the layers below it (docs/ARCHITECTURE.md, "The harness")."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("envs", "harness", "lopd", "benchmarks")

HARNESS_LAYERS = [
    {"config", "atomic_dir", "metrics", "configs", "stats", "traces"},
    {"models"},
    {"engines"},
    {"rollout", "distributed", "env_source"},
    {"learners"},
    {"training"},
    {"evaluation"},
    {"basemodel"},
    {"prepare"},
    {"experiments"},
    {"cli", "__main__"},
]
"""harness/'s layers, bottom first (a top-level module or subpackage of harness/ each)."""


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            name = ".".join(p.relative_to(ROOT).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = p
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """Every project module ``name`` imports, wherever the import statement stands."""
    out = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in mods:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(m, p, mods) for m, p in mods.items()}


def test_no_two_modules_import_each_other():
    graph = _graph()
    mutual = sorted((a, b) for a, deps in graph.items() for b in deps if a < b and a in graph.get(b, ()))
    assert not mutual, f"modules that import each other: {mutual}"


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "harness" or len(parts) < 2:
        return None
    return next(i for i, layer in enumerate(HARNESS_LAYERS) if parts[1] in layer)


def test_harness_imports_point_down_its_layers():
    graph = _graph()
    tops = {m.split(".")[1] for m in graph if m.startswith("harness.")}
    assert tops <= set().union(*HARNESS_LAYERS), f"harness/ parts in no layer: {tops - set().union(*HARNESS_LAYERS)}"
    upward = sorted((a, b) for a, deps in graph.items() for b in deps
                    if _layer(a) is not None and _layer(b) is not None and _layer(b) > _layer(a))
    assert not upward, f"imports of a higher layer: {upward}"


def test_harness_keeps_at_most_ten_top_level_modules():
    top = [p.name for p in (ROOT / "harness").glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(top) <= 10, top


def test_production_commands_reach_no_experiment_code():
    """``lopd train``, ``prepare``, ``eval`` ... import nothing of harness/experiments/, even transitively:
    the demo is a recipe over the product, not part of its path."""
    graph = _graph()
    for cmd in [m for m in graph if m.startswith("harness.cli.") and m != "harness.cli.demo"]:
        seen, todo = set(), [cmd]
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo += [d for d in graph.get(m, ()) if d.startswith("harness.")]
        assert not [m for m in seen if m.startswith("harness.experiments")], cmd
