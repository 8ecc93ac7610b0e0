"""`make mutation`: mutation testing (cosmic-ray) of the modules whose logic the tests must pin down.

    python tools/mutation.py [TARGET ...]        # every target when none is named

For each target, cosmic-ray mutates the module one small change at a time (an operator swapped, a
constant changed, a condition negated, ...) and runs only the fast tests that cover it; a mutant is
killed when a test fails. It prints the killed share per target and each survivor.

The mutants are made in a copy of the tracked tree, one per target under build/mutation/TARGET/ (never in
this checkout, so an interrupted run leaves no mutated file behind, and targets can run side by side).
Sessions are kept there: running again resumes where an interrupted run stopped; `--fresh` starts over
(needed after the module itself changed). Mutants that no test can kill because they change
nothing observable are listed, with why, in docs/mutation.md; mutants inside type annotations are skipped
(every module here has `from __future__ import annotations`: an annotation is never evaluated).
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "build" / "mutation"
PYTEST = "python -m pytest -x -q -p no:randomly -p no:cacheprovider -p no:xdist"

# target -> (module or package, the fast tests that cover it)
TARGETS = {
    "compare": ("reference_train/compare.py", "tests/parity"),
    "runfile": ("reference_train/runfile.py", "tests/trainer/test_runfile.py tests/parity"),
    "selection": (
        "portlayer/selection.py",
        "tests/runtime/test_selection.py tests/runtime/test_binding.py"
        " tests/runtime/test_vendor_dispatch.py::test_probing_prefers_a_vendor_plugin_over_cuda_and_stops_at_the_first_with_a_device"
        " tests/runtime/test_vendor_dispatch.py::test_a_plugin_that_sees_no_device_or_fails_to_load_is_skipped",
    ),
    "runtime": ("portlayer/runtime.py", "tests/runtime/test_cpu_api.py tests/runtime/test_binding.py"),
    "environment": ("portlayer/environment.py", "tests/runtime/test_environment.py"),
    "patches": ("portlayer/dropin/patches.py", "tests/dropin/test_patching.py tests/dropin/test_dropin_cpu.py"),
    "shell": ("migrate/shell.py", "tests/migrate_cli/test_shell.py"),
    "rules": ("migrate/rules", "tests/migrate"),
    # The fastest tests first: with -x, a killed mutant stops at the first that fails; test_device_chains,
    # which runs migrated programs, comes last.
    "guards": (
        "migrate/engine/guards.py",
        "tests/migrate/test_dispatch_report.py tests/migrate/test_codes.py tests/migrate/test_meaning.py"
        " tests/migrate/test_golden.py tests/migrate/test_device_chains.py",
    ),
    # Of the golden tests only the comparisons with the expected output (4 s of their 17 s): a second run and the
    # prefilter check the engine, not what the data flow or the rule finds.
    "dataflow": (
        "migrate/engine/dataflow.py",
        "tests/migrate/test_int_device_flow.py tests/migrate/test_codes.py tests/migrate/test_meaning.py"
        " tests/migrate/test_golden.py::test_golden",
    ),
    "int_devices": (
        "migrate/rules/int_devices.py",
        "tests/migrate/test_int_device_flow.py tests/migrate/test_codes.py tests/migrate/test_meaning.py"
        " tests/migrate/test_golden.py::test_golden",
    ),
    "out_of_tree": ("portlayer/backends/out_of_tree.py", "tests/runtime/test_out_of_tree.py"),
    # The bookkeeping's unit tests first (2 s), then the two that measure a whole fake step's memory; not the
    # op-by-op comparisons with a real step (9 s), which read the recorded ops, not the memory figures.
    "preflight_memory": (
        "portlayer/preflight/fake_step.py",
        "tests/preflight/test_memory_parts.py tests/preflight/test_fake.py::test_memory_of_a_known_model_by_hand"
        " tests/preflight/test_fake.py::test_memory_prediction_matches_the_cpu_allocator",
    ),
    "preflight_engines": ("portlayer/preflight/engines.py", "tests/preflight/test_engines.py"),
    # The strategy table and what applies each strategy. The unit tests first (2 s); DeepSpeed's accelerator is
    # checked in fresh interpreters (DeepSpeed picks it once per process, when imported), 8 s. Not run: the
    # trainer's strategy tests (torchrun, minutes each) and preflight's scaled step (12 s of whole fake steps
    # for the blocks and buckets the unit tests check directly).
    "strategies": (
        "portlayer/strategies",
        "tests/strategies/test_prepare.py tests/preflight/test_sharding.py::test_model_states_are_the_zero_papers_closed_form"
        " tests/preflight/test_sharding.py::test_each_state_is_split_by_the_stage_that_shards_it"
        " tests/preflight/test_sharding.py::test_a_frozen_base_costs_its_weights_only_sharded_where_weights_are"
        " tests/strategies/test_deepspeed_accelerator.py"
        # Tensor parallel's plan and the layout (in process), and one step of each split model against the whole one
        # (a 2-rank job of ~20 s); the training runs are torchrun jobs, too slow per mutant.
        " tests/trainer/test_tensor_parallel.py::test_bert_splits_q_k_v_and_the_mlp_up_by_columns_and_what_reads_them_back_by_rows"
        " tests/trainer/test_tensor_parallel.py::test_for_a_model_transformers_plans_the_derived_plan_is_its_own"
        " tests/trainer/test_tensor_parallel.py::test_deriving_the_plan_draws_nothing_from_the_generator_and_leaves_the_model_training"
        " tests/trainer/test_tensor_parallel.py::test_a_model_that_does_not_split_is_refused_in_one_line"
        " tests/strategies/test_layout.py tests/trainer/test_split_gradients.py",
    ),
}
# Targets of which only some top-level definitions are the code under test: mutants elsewhere in the
# module are skipped (the rest of fake_step.py records the step's ops, which the preflight op tests cover).
ONLY = {"preflight_memory": ("Memory", "_snapshot", "_peak_so_far", "_current_total", "_memory", "_steady_state")}
# The installed names of the folders the editable install maps (setup.py package_dir): in the copy they
# are links, so that `portlayer.migrate` and `portlayer.train` import the copy's (mutated) files.
LINKS = {"portlayer/migrate": "../migrate", "portlayer/train": "../reference_train"}
GOAL = 0.85


def copy_tree(tree: Path) -> None:
    """The tracked and untracked-but-not-ignored files of this checkout, as they are now."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    if tree.exists():
        shutil.rmtree(tree)
    for name in filter(None, files):
        source = REPO / name
        if source.is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, tree / name)
    for link, target in LINKS.items():
        (tree / link).symlink_to(target)


def tool(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def forget_survivors(session: Path) -> None:
    """Make the survivors pending again (after tests were added to kill them)."""
    with sqlite3.connect(session) as db:
        db.execute("DELETE FROM work_results WHERE test_outcome = 'SURVIVED'")


def run_target(name: str, fresh: bool, retest: bool) -> tuple[int, int, int, list[str]]:
    module, tests = TARGETS[name]
    tree, config, session = WORK / name / "tree", WORK / name / "config.toml", WORK / name / "session.sqlite"
    copy_tree(tree)
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{module}"\n'
        "timeout = 180.0\n"  # a normal run takes seconds; a mutant can loop forever
        "excluded-modules = []\n"
        f'test-command = "{PYTEST} {tests}"\n'
        '[cosmic-ray.distributor]\nname = "local"\n'
    )
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    if fresh or not session.exists():
        session.unlink(missing_ok=True)
        subprocess.run([tool("cosmic-ray"), "init", str(config), str(session)], cwd=tree, env=env, check=True)
        skip_annotations(session, ONLY.get(name))
    elif retest:
        forget_survivors(session)
    subprocess.run([tool("cosmic-ray"), "exec", str(config), str(session)], cwd=tree, env=env, check=True)
    return tally(session, ONLY.get(name))


@functools.cache
def annotation_spans(path: Path) -> tuple[tuple[tuple[int, int], tuple[int, int]], ...]:
    """(start, end) (line from 1, column from 0) of every annotation in the file."""
    spans = []
    for node in ast.walk(ast.parse(path.read_text())):
        annotations = []
        if isinstance(node, ast.arg):
            annotations.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        spans += [
            ((each.lineno, each.col_offset), (each.end_lineno, each.end_col_offset)) for each in annotations if each
        ]
    return tuple(spans)


def in_annotation(mutation: dict) -> bool:
    # Read from this checkout: the copy's file may hold a mutant right now.
    position = tuple(mutation["start_pos"])
    return any(start <= position < end for start, end in annotation_spans(REPO / mutation["module_path"]))


@functools.cache
def definition_lines(path: Path, names: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    """(first, last) line of each top-level function or class of the file named in `names`."""
    return tuple(
        (node.lineno, node.end_lineno)
        for node in ast.parse(path.read_text()).body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names
    )


def outside(mutation: dict, names: tuple[str, ...] | None) -> bool:
    """The mutant lies outside the definitions under test (never, when the whole module is)."""
    if names is None:
        return False
    line = mutation["start_pos"][0]
    spans = definition_lines(REPO / mutation["module_path"], names)
    return not any(first <= line <= last for first, last in spans)


def skip_annotations(session: Path, names: tuple[str, ...] | None = None) -> None:
    """Mark as skipped the mutants inside annotations, and those outside `names` where given."""
    from cosmic_ray.work_db import use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(session)) as db:
        for item in db.work_items:
            mutation = {"module_path": str(item.mutations[0].module_path), "start_pos": item.mutations[0].start_pos}
            if in_annotation(mutation) or outside(mutation, names):
                db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))


def tally(session: Path, names: tuple[str, ...] | None = None) -> tuple[int, int, int, list[str]]:
    """(killed, run, all, survivors) from the session: a mutant the tests did not fail on survived; `all`
    counts every mutant outside annotations (and inside `names`, where given), run or not."""
    dump = subprocess.run([tool("cosmic-ray"), "dump", str(session)], capture_output=True, text=True, check=True).stdout
    killed = run = every = 0
    survivors = []
    for line in dump.splitlines():
        job, result = json.loads(line)
        if in_annotation(job["mutations"][0]) or outside(job["mutations"][0], names):
            continue
        every += 1
        if result is None or result.get("worker_outcome") != "normal":
            continue  # not run yet, or broke the worker
        run += 1
        if result["test_outcome"] == "killed":
            killed += 1
        else:
            mutation = job["mutations"][0]
            survivors.append(
                f"{mutation['module_path']}:{mutation['start_pos'][0]}: {mutation['operator_name']}"
                f" #{mutation['occurrence']}"
            )
    return killed, run, every, survivors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", choices=[[], *TARGETS], metavar="TARGET", default=[])
    parser.add_argument("--fresh", action="store_true", help="Start every session over.")
    parser.add_argument("--retest-survivors", action="store_true", help="Run the survivors again, with the tests as they are now.")
    parser.add_argument("--report", action="store_true", help="Only print the figures of existing sessions.")
    args = parser.parse_args()
    names = args.targets or list(TARGETS)
    figures = {}
    for name in names:
        session = WORK / name / "session.sqlite"
        if args.report:
            if session.exists():
                figures[name] = tally(session, ONLY.get(name))
            continue
        figures[name] = run_target(name, args.fresh, args.retest_survivors)
    below = 0
    for name, (killed, run, every, survivors) in figures.items():
        share = killed / run if run else 0.0
        below += share < GOAL
        print(f"{TARGETS[name][0]:28} {killed:5} of {run:5} mutants killed ({share:6.1%}); {run} of {every} run")
        for survivor in survivors:
            print(f"    survived: {survivor}")
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())
