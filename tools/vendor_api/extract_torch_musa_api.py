"""Regenerate torch_musa_api.json: the public names of `torch.musa`, read from torch_musa's published source.

torch_musa is not on the package index and cannot be imported without MUSA, so its source is parsed, not
run. The package itself is `torch.musa` (its `__init__.py` sets `torch.musa = sys.modules[__name__]`), so
its public names are what `torch_musa/__init__.py` defines, or imports from torch_musa's own modules, at
module level, with each `from .x import *` expanded to that module's `__all__` (or its public names when it has none):

    git clone --depth 1 --branch v2.7.1 https://github.com/MooreThreads/torch_musa /tmp/torch_musa
    python -m tools.vendor_api.extract_torch_musa_api /tmp/torch_musa --release v2.7.1
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

from tools.vendor_api.extract_torch_npu_api import exported_names

PACKAGE = "torch_musa"
MODULE_PATH = f"{PACKAGE}/__init__.py"
OUTPUT = Path(__file__).resolve().parents[2] / "tests" / "vendor_api" / "torch_musa_api.json"


def _top_level(body: list[ast.stmt]):
    """Statements at module level, including those inside top-level if / try blocks."""
    for node in body:
        if isinstance(node, ast.If):
            yield from _top_level(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_level(node.body + node.orelse + node.finalbody)
        else:
            yield node


def _module_file(root: Path, package: str, node: ast.ImportFrom) -> Path | None:
    """The source file a relative `from .x import …` in `package` reads from, inside the tree."""
    if not node.level:
        return None
    parts = package.split(".")[: len(package.split(".")) - node.level + 1] + (node.module or "").split(".")
    base = root.joinpath(*[part for part in parts if part])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def public_names(root: Path, path: Path, package: str) -> set[str]:
    source = path.read_text(encoding="utf-8")
    explicit = exported_names(source)
    if explicit:
        return set(explicit)
    names: set[str] = set()
    for node in _top_level(ast.parse(source).body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(PACKAGE)):
            # The package's own modules only: `from typing import Set` is not torch.musa's API.
            for alias in node.names:
                if alias.name != "*":
                    names.add(alias.asname or alias.name)
                    continue
                star = _module_file(root, package, node)
                if star is not None:
                    subpackage = ".".join(star.relative_to(root).with_suffix("").parts)
                    names |= public_names(root, star, subpackage.removesuffix(".__init__"))
    return {name for name in names if not name.startswith("_")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("source", type=Path, help="a torch_musa source tree (a checkout of a release tag)")
    parser.add_argument("--release", required=True, help="the release tag the tree is checked out at")
    parser.add_argument("-o", "--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    init = args.source / MODULE_PATH
    try:
        names = public_names(args.source, init, PACKAGE)
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        print(f"extract_torch_musa_api: cannot read {init}: {exc}", file=sys.stderr)
        return 2
    record = {"torch_musa": args.release, "source": MODULE_PATH, "names": sorted(names)}
    args.output.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"{len(record['names'])} names from torch_musa {record['torch_musa']} -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
