"""The engine's one entry: outside `migrate/engine/` and the rules it runs (`migrate/rules/`), code imports
`portlayer.migrate.engine`, never one of its modules, so the engine can change inside its fence."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INSIDE = (REPO / "migrate" / "engine", REPO / "migrate" / "rules")


def outside_sources() -> list[Path]:
    roots = [REPO / "migrate", REPO / "portlayer", REPO / "reference_train", REPO / "bench", REPO / "examples"]
    return sorted(
        path for root in roots for path in root.rglob("*.py")
        if not any(folder in path.parents for folder in INSIDE)
    )


def engine_modules_imported(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return [name for name in names if name.startswith("portlayer.migrate.engine.")]


def test_only_the_engine_and_its_rules_import_the_engines_modules():
    crossing = {
        str(path.relative_to(REPO)): modules
        for path in outside_sources()
        if (modules := engine_modules_imported(path))
    }
    assert crossing == {}


def test_the_fence_test_sees_the_driver():
    assert REPO / "migrate" / "job.py" in outside_sources()
    assert REPO / "migrate" / "engine" / "scopes.py" not in outside_sources()


def test_the_engine_names_no_rule():
    # It runs the rules it is given (`RULES`) through their bases and computes what they declare (`NEEDS`):
    # no rule class, and no table of a rule's module, is named inside it.
    allowed = {"portlayer.migrate.rules": {"RULES"}, "portlayer.migrate.rules.base": {"BaseRule", "FileRule", "Rule"}}
    named = {}
    for path in sorted((REPO / "migrate" / "engine").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("portlayer.migrate.rules"):
                extra = {alias.name for alias in node.names} - allowed.get(node.module, set())
                if extra:
                    named[str(path.relative_to(REPO))] = sorted(extra)
            elif isinstance(node, ast.Import) and any(a.name.startswith("portlayer.migrate.rules") for a in node.names):
                named[str(path.relative_to(REPO))] = [a.name for a in node.names]
    assert named == {}
