"""`portlayer migrate` over whole public training repositories, on every target, checked as a user would
check it: no internal error, every file that changes still parses, a second run changes nothing, and no
CUDA-specific site is left in silence.

    python bench/migrate_repositories.py [--target T]... [-j N] [--silent FILE.json] TREE...

Each tree (a repository's checkout, e.g. Megatron-LM, DeepSpeed, mmengine, accelerate, transformers, trl,
LLaMA-Factory, ms-swift, OpenRLHF, torchtitan) is walked as the command walks it and migrated in memory
through the command's own per-file path (`job.process_file`, nothing written); each migrated file is
migrated again from its output. Printed per tree and target: files scanned and changed, sites rewritten (as
the command's summary counts them), diagnostics by severity, internal errors, changed files that do not
parse, files a second run changes; then the CUDA-specific sites of the input as `_cuda_sites` finds them
(its own patterns, not the codemod's), the share converted (the line changed), how many are reported (a
diagnostic points into their statement) and how many are silent (neither); seconds. `--silent` writes each
silent site (file, line, patterns, text) by tree and target. Exit status 1 if an internal error, an
unparsable output or a second-run change is not 0. Sites in folders the walk leaves out (build outputs,
told in one line by the command) and in files it cannot decode or parse (reported as PL901/PL902) are not
counted.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import json
import os
import sys
import time
from pathlib import Path

from portlayer.migrate import job
from portlayer.migrate.engine import TARGETS
from portlayer.migrate.files import DecodeError, decode_python, decode_shell
from portlayer.migrate.parallel import default_jobs, run_all
from portlayer.migrate.report import Tally
from portlayer.migrate.walk import Found, discover

sys.path.insert(0, str(Path(__file__).parent))  # run alone or by `python -m bench`: find _cuda_sites
from _cuda_sites import SiteCount, count_sites  # noqa: E402


@dataclasses.dataclass
class Checked:
    """One tree on one target."""

    tally: Tally = dataclasses.field(default_factory=Tally)
    internal_errors: list[str] = dataclasses.field(default_factory=list)
    unparsable: list[str] = dataclasses.field(default_factory=list)
    unsettled: list[str] = dataclasses.field(default_factory=list)  # a second run changed them
    sites: SiteCount = dataclasses.field(default_factory=SiteCount)
    seconds: float = 0.0

    @property
    def failures(self) -> int:
        return len(self.internal_errors) + len(self.unparsable) + len(self.unsettled)


def check_file(found: Found, target: str) -> tuple[job.FileResult, str | None, SiteCount]:
    """The file's result, what is wrong with its output (None: nothing), and its CUDA sites' verdicts."""
    options = job.Options(target, write=False, emit=True)
    try:
        data = found.path.read_bytes()
    except OSError:
        return job.process_file(found, options), None, SiteCount()  # the run's own failed result
    result = job.process_bytes(str(found.path), found.kind, data, options)
    sites = sites_of(result, data)
    if result.status != "changed" or result.output is None:
        return dataclasses.replace(result, output=None), None, sites
    if found.kind == "python":
        try:
            ast.parse(result.output)
        except SyntaxError as error:
            problem = f"does not parse: {error.msg}, line {error.lineno}"
            return dataclasses.replace(result, output=None), problem, sites
    again = job.process_bytes(str(found.path), found.kind, result.output, options)
    problem = None if again.status == "unchanged" and not again.changes else "a second run changes it"
    return dataclasses.replace(result, output=None), problem, sites


def sites_of(result: job.FileResult, data: bytes) -> SiteCount:
    """What became of the file's CUDA sites (`_cuda_sites`): the input against the output and diagnostics."""
    decode = decode_python if result.kind == "python" else decode_shell
    try:
        before = decode(data).text
        after = decode(result.output).text if result.output is not None else before
    except DecodeError:  # undecodable: the run reports it (PL902)
        return SiteCount()
    return count_sites(result.path, result.kind, before, after, result.diagnostics)


def check_tree(tree: Path, target: str, jobs: int) -> Checked:
    checked = Checked()
    start = time.perf_counter()
    found, _, _ = discover([tree])
    work = sum(file.size for file in found)
    for result, problem, sites in run_all(functools.partial(check_file, target=target), found, jobs, work):
        checked.tally.add(result)
        checked.sites.add(sites)
        if result.error.startswith("internal error"):
            checked.internal_errors.append(f"{result.path}: {result.error}")
        if problem == "a second run changes it":
            checked.unsettled.append(result.path)
        elif problem is not None:
            checked.unparsable.append(f"{result.path}: {problem}")
    checked.seconds = time.perf_counter() - start
    return checked


def row(name: str, target: str, checked: Checked) -> str:
    tally, sites = checked.tally, checked.sites
    severities = "/".join(str(tally.severities[s]) for s in ("error", "warning", "info"))
    converted = 100 * sites.counts["converted"] / sites.sites if sites.sites else 100.0
    return (f"{name:16} {target:8} {tally.files['scanned']:6d} {tally.files['changed']:6d} "
            f"{tally.rewritten['sites']:6d} {severities:>14} {len(checked.internal_errors):5d} "
            f"{len(checked.unparsable):5d} {len(checked.unsettled):6d} "
            f"{sites.sites:6d} {converted:6.1f} {sites.counts['reported']:5d} {sites.counts['silent']:6d} "
            f"{checked.seconds:8.1f}")


HEADER = (f"{'tree':16} {'target':8} {'files':>6} {'chgd':>6} {'rewr':>6} {'err/warn/info':>14} "
          f"{'ierr':>5} {'unpar':>5} {'rerun':>6} {'sites':>6} {'conv%':>6} {'rep':>5} {'silent':>6} {'seconds':>8}")


def silent_sites(tree: Path, checked: Checked) -> list[dict]:
    """Every site left in silence, for `--silent`: file (relative to the tree), line, patterns, text."""
    return [{"file": os.path.relpath(path, tree), "line": site.line, "patterns": list(site.patterns),
             "text": site.text} for path, site in checked.sites.silent]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", type=Path)
    parser.add_argument("--target", action="append", choices=TARGETS, help="repeatable; default: all four")
    parser.add_argument("-j", "--jobs", type=int, default=default_jobs())
    parser.add_argument("--silent", type=Path, metavar="FILE.json",
                        help="write every site left in silence there, by tree and target")
    args = parser.parse_args()
    if not args.trees:  # `python -m bench` runs every script bare: this one needs the trees to migrate
        print("migrate_repositories.py: pass the repositories' checkouts (README: the whole-repository run)")
        return
    print(HEADER)
    failures, silent = [], {}
    for tree in args.trees:
        for target in args.target or TARGETS:
            checked = check_tree(tree, target, args.jobs)
            print(row(tree.name, target, checked), flush=True)
            failures += checked.internal_errors + checked.unparsable + checked.unsettled
            silent.setdefault(tree.name, {})[target] = silent_sites(tree, checked)
            if args.silent:  # after each tree and target: a long run's list is readable while it goes on
                args.silent.write_text(json.dumps(silent, indent=1) + "\n")
    for failure in failures:
        print(f"  {failure}")
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
