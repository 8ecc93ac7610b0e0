"""`portlayer migrate --check` over a large real tree, against the cost of merely parsing what it must.

    python bench/migrate_tree.py [TREE]      (default: the installed `transformers` package)

Anchor, measured in the same run: one process parsing and printing with LibCST just the files that
mention cuda or nccl (case-insensitive), read beforehand, nothing else. The command does more — walks the
tree, reads and prefilters every file, runs every rule, diffs — and may use every core. Goal: ratio <= 1.0.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
import subprocess
import sys
import time
from pathlib import Path

import libcst as cst
from portlayer.migrate.walk import discover

MENTIONS = re.compile(r"cuda|nccl", re.IGNORECASE)


def default_tree() -> Path:
    # find_spec locates the package without importing it (importing transformers takes seconds).
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("bench/migrate_tree.py: transformers is not installed; pass a tree: migrate_tree.py TREE")
    return Path(next(iter(spec.submodule_search_locations)))


def floor_seconds(tree: Path) -> tuple[float, int, int]:
    found, _ = discover([tree])
    texts = [f.path.read_text(encoding="utf-8", errors="replace") for f in found if f.kind == "python"]
    mentioning = [text for text in texts if MENTIONS.search(text)]
    printed = 0
    start = time.perf_counter()
    for text in mentioning:
        with contextlib.suppress(cst.ParserSyntaxError):
            printed += len(cst.parse_module(text).code)
    return time.perf_counter() - start, len(found), len(mentioning)


def migrate_seconds(tree: Path) -> tuple[float, str]:
    command = [
        sys.executable,
        "-c",
        "from portlayer.cli import main; main()",
        "migrate",
        "--check",
        str(tree),
    ]
    start = time.perf_counter()
    run = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if run.returncode not in (0, 1, 2):
        sys.exit(f"bench/migrate_tree.py: portlayer migrate crashed:\n{run.stderr[-2000:]}")
    return seconds, run.stderr.strip().splitlines()[-1]


def main() -> None:
    tree = Path(sys.argv[1]) if len(sys.argv) > 1 else default_tree()
    ours, summary = migrate_seconds(tree)
    floor, files, mentioning = floor_seconds(tree)
    print(f"tree: {tree} ({files} files, {mentioning} mention cuda/nccl)")
    print(f"portlayer migrate --check: {ours:.2f} s  ({summary})")
    print(f"floor, LibCST parse + print of the {mentioning} files, one process: {floor:.2f} s")
    print(f"ratio: {ours / floor:.2f}  (goal <= 1.0)")


if __name__ == "__main__":
    main()
