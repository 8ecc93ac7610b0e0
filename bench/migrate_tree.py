"""`portlayer migrate --check` over a large real tree, against the cost of merely parsing what it must.

    python bench/migrate_tree.py [TREE]      (default: the installed `transformers` package)

Anchor, measured in the same run: one process parsing and printing with LibCST just the files that
mention cuda or nccl (case-insensitive), read beforehand, nothing else. The command does more — walks the
tree, reads and prefilters every file, runs every rule, diffs — and may use every core. Goal: wall-clock
ratio <= 0.4 for the default (neutral) target, and neutral no slower than a vendor target (npu).

Wall clock is what a user waits; on a machine others load it swings with their work, so the CPU seconds
(the command's workers together, against the anchor's) are printed beside it.

The command pauses CPython's cycle collector while it builds a file's trees (most of `ast.parse`'s time
goes to it otherwise); the anchor runs as a plain script would, with the collector on. So that the
ratio can be read either way, the anchor is also timed with the collector paused, and that ratio printed.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import re
import resource
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


def mentioning(tree: Path) -> tuple[list[str], int]:
    """The texts of the tree's Python files that mention cuda/nccl, and the number of files."""
    found, _, _ = discover([tree])
    texts = [f.path.read_text(encoding="utf-8", errors="replace") for f in found if f.kind == "python"]
    return [text for text in texts if MENTIONS.search(text)], len(found)


def floor_seconds(texts: list[str], collector: bool = True) -> tuple[float, float]:
    """Wall and CPU seconds of the anchor over `texts`."""
    printed = 0
    if not collector:
        gc.disable()
    try:
        start, cpu = time.perf_counter(), time.process_time()
        for text in texts:
            with contextlib.suppress(cst.ParserSyntaxError):
                printed += len(cst.parse_module(text).code)
        return time.perf_counter() - start, time.process_time() - cpu
    finally:
        gc.enable()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def migrate_seconds(tree: Path, target: str) -> tuple[float, float, str]:
    """Wall and CPU seconds (its workers included) of `portlayer migrate --check`, and its summary line."""
    command = [
        sys.executable,
        "-c",
        "from portlayer.cli import main; main()",
        "migrate",
        "--check",
        "--target",
        target,
        str(tree),
    ]
    start, cpu = time.perf_counter(), _children_cpu()
    run = subprocess.run(command, capture_output=True, text=True)
    seconds, cpu_seconds = time.perf_counter() - start, _children_cpu() - cpu
    if run.returncode not in (0, 1, 2):
        sys.exit(f"bench/migrate_tree.py: portlayer migrate crashed:\n{run.stderr[-2000:]}")
    return seconds, cpu_seconds, run.stderr.strip().splitlines()[-1]


def main() -> None:
    tree = Path(sys.argv[1]) if len(sys.argv) > 1 else default_tree()
    runs = {target: migrate_seconds(tree, target) for target in ("neutral", "npu")}
    texts, files = mentioning(tree)
    floor, floor_cpu = floor_seconds(texts)
    paused, paused_cpu = floor_seconds(texts, collector=False)
    print(f"tree: {tree} ({files} files, {len(texts)} mention cuda/nccl)")
    print(f"floor, LibCST parse + print of the {len(texts)} files, one process: {floor:.2f} s ({floor_cpu:.2f} s cpu)")
    print(f"  with the cycle collector paused: {paused:.2f} s ({paused_cpu:.2f} s cpu)")
    for target, (ours, cpu, summary) in runs.items():
        print(f"portlayer migrate --check --target {target}: {ours:.2f} s ({cpu:.2f} s cpu)  ({summary})")
        print(f"  ratio: {ours / floor:.2f}  cpu ratio: {cpu / floor_cpu:.2f}  (goal: ratio <= 0.4)"
              f"  against the paused floor: {ours / paused:.2f}, cpu {cpu / paused_cpu:.2f}")
    neutral, npu = runs["neutral"][1], runs["npu"][1]
    print(f"neutral / npu, cpu seconds: {neutral / npu:.2f}  (goal <= 1.0)")


if __name__ == "__main__":
    main()
