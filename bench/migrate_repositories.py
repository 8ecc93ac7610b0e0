"""`portlayer migrate` over whole public training repositories, on every target, checked as a user would
check it: no internal error, every file that changes still parses, and a second run changes nothing.

    python bench/migrate_repositories.py [--target T]... [-j N] TREE...

Each tree (a repository's checkout, e.g. Megatron-LM, DeepSpeed, mmengine, accelerate, transformers, trl,
LLaMA-Factory, ms-swift, OpenRLHF, torchtitan) is walked as the command walks it and migrated in memory
through the command's own per-file path (`job.process_file`, nothing written); each migrated file is
migrated again from its output. Printed per tree and target: files scanned and changed, sites converted,
diagnostics by severity, internal errors, changed files that do not parse, files a second run changes,
seconds. Exit status 1 if any of the last three is not 0.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import sys
import time
from pathlib import Path

from portlayer.migrate import job
from portlayer.migrate.engine import TARGETS
from portlayer.migrate.parallel import default_jobs, run_all
from portlayer.migrate.report import Tally
from portlayer.migrate.walk import Found, discover


@dataclasses.dataclass
class Checked:
    """One tree on one target."""

    tally: Tally = dataclasses.field(default_factory=Tally)
    internal_errors: list[str] = dataclasses.field(default_factory=list)
    unparsable: list[str] = dataclasses.field(default_factory=list)
    unsettled: list[str] = dataclasses.field(default_factory=list)  # a second run changed them
    seconds: float = 0.0

    @property
    def failures(self) -> int:
        return len(self.internal_errors) + len(self.unparsable) + len(self.unsettled)


def check_file(found: Found, target: str) -> tuple[job.FileResult, str | None]:
    """The file's result, and what is wrong with its output (None: nothing)."""
    options = job.Options(target, write=False, emit=True)
    result = job.process_file(found, options)
    if result.status != "changed" or result.output is None:
        return dataclasses.replace(result, output=None), None
    if found.kind == "python":
        try:
            ast.parse(result.output)
        except SyntaxError as error:
            return dataclasses.replace(result, output=None), f"does not parse: {error.msg}, line {error.lineno}"
    again = job.process_bytes(str(found.path), found.kind, result.output, options)
    problem = None if again.status == "unchanged" and not again.changes else "a second run changes it"
    return dataclasses.replace(result, output=None), problem


def check_tree(tree: Path, target: str, jobs: int) -> Checked:
    checked = Checked()
    start = time.perf_counter()
    found, _, _ = discover([tree])
    work = sum(file.size for file in found)
    for result, problem in run_all(functools.partial(check_file, target=target), found, jobs, work):
        checked.tally.add(result)
        if result.error.startswith("internal error"):
            checked.internal_errors.append(f"{result.path}: {result.error}")
        if problem == "a second run changes it":
            checked.unsettled.append(result.path)
        elif problem is not None:
            checked.unparsable.append(f"{result.path}: {problem}")
    checked.seconds = time.perf_counter() - start
    return checked


def row(name: str, target: str, checked: Checked) -> str:
    tally = checked.tally
    severities = "/".join(str(tally.severities[s]) for s in ("error", "warning", "info"))
    return (f"{name:16} {target:8} {tally.files['scanned']:6d} {tally.files['changed']:6d} "
            f"{tally.rewritten['sites']:6d} {severities:>14} {len(checked.internal_errors):5d} "
            f"{len(checked.unparsable):5d} {len(checked.unsettled):6d} {checked.seconds:8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", type=Path)
    parser.add_argument("--target", action="append", choices=TARGETS, help="repeatable; default: all four")
    parser.add_argument("-j", "--jobs", type=int, default=default_jobs())
    args = parser.parse_args()
    if not args.trees:  # `python -m bench` runs every script bare: this one needs the trees to migrate
        print("migrate_repositories.py: pass the repositories' checkouts (README: the whole-repository run)")
        return
    print(f"{'tree':16} {'target':8} {'files':>6} {'chgd':>6} {'sites':>6} {'err/warn/info':>14} "
          f"{'ierr':>5} {'unpar':>5} {'rerun':>6} {'seconds':>8}")
    failures = []
    for tree in args.trees:
        for target in args.target or TARGETS:
            checked = check_tree(tree, target, args.jobs)
            print(row(tree.name, target, checked), flush=True)
            failures += checked.internal_errors + checked.unparsable + checked.unsettled
    for failure in failures:
        print(f"  {failure}")
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
