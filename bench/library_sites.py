"""What share of a tree's CUDA-only library import sites `portlayer migrate` converts, per library.

    python bench/library_sites.py [--target T] TREE...

A site is an import of a CUDA-only library (the packages of `portlayer.migrate.rules.libraries`: apex,
flash_attn, xformers, liger_kernel, triton, …), counted per imported module the way CPython's parser
sees the file before and after migration. A site is converted when the migrated file no longer imports
it: the program's own fallback was taken (PL120) or every use was rewritten (PL13x). The rest stay, each
with its PL2xx report. Printed: per library, sites before and after; the share converted; and the calls
rewritten or left with a report (PL130-PL132, PL230-PL231). Nothing is written.
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter
from pathlib import Path

from portlayer.migrate.engine import SourceError, migrate_source
from portlayer.migrate.rules.libraries import LIBRARIES
from portlayer.migrate.walk import discover


def library_imports(source: str) -> Counter:
    """Top-level CUDA-only package -> how many import sites name it."""
    found: Counter = Counter()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names if alias.name.split(".")[0] in LIBRARIES)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            package = node.module.split(".")[0]
            if package in LIBRARIES:
                found[package] += 1
    return found


def measure(trees: list[Path], target: str) -> tuple[Counter, Counter, Counter, list[str]]:
    before: Counter = Counter()
    after: Counter = Counter()
    codes: Counter = Counter()
    failed: list[str] = []
    found, _, _ = discover(trees)
    for file in found:
        if file.kind != "python":
            continue
        source = file.path.read_text(encoding="utf-8", errors="replace")
        try:
            sites = library_imports(source)
        except (SyntaxError, ValueError):
            continue  # a file Python cannot parse is left as it is, and counted nowhere
        if not sites:
            continue
        before += sites
        try:
            result = migrate_source(source, target)
        except SourceError:
            continue
        except Exception as error:  # noqa: BLE001 - the command leaves such a file untouched, and says so
            failed.append(f"{file.path}: {type(error).__name__}")
            after += sites
            continue
        after += library_imports(result.code)
        codes.update(change.code for change in result.changes)
        codes.update(diagnostic.code for diagnostic in result.diagnostics)
    return before, after, codes, failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", type=Path)
    parser.add_argument("--target", default="neutral")
    args = parser.parse_args()
    if not args.trees:  # `python -m bench` runs every script bare: this one needs the trees to measure
        print("library_sites.py: pass the trees to measure (README: eight public training repositories)")
        return
    before, after, codes, failed = measure(args.trees, args.target)
    print(f"{'library':24} {'sites':>6} {'left':>6}")
    for package, count in before.most_common():
        print(f"{package:24} {count:6d} {after[package]:6d}")
    total, left = sum(before.values()), sum(after.values())
    print(f"library import sites: {total}, converted: {total - left} ({(total - left) / max(total, 1):.0%})")
    rewritten = sum(codes[c] for c in ("PL130", "PL131", "PL132"))
    print(f"calls rewritten (PL130-PL132): {rewritten}; left with a report (PL230, PL231): "
          f"{codes['PL230'] + codes['PL231']}; fallbacks taken (PL120): {codes['PL120']}")
    for line in failed:
        print(f"internal error, file left as is (its sites count as left): {line}")


if __name__ == "__main__":
    main()
