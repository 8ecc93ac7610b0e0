"""The lane for a lent GPU machine (`make test-gpu`, issue 29): the whole suite on CUDA, then the CUDA-only checks.

    python3 tools/gpu_lane.py [--wheels DIR] [--out DIR] [--dry-run]

It uses the machine's own torch (no venv, no pinned cpu torch) and downloads nothing: the wheels in `--wheels
DIR` (what the machine lacks: transformers, tokenizers, libcst, regex, datasets, dill, multiprocess, …, and a
portlayer wheel if one is there) are installed with `pip --no-index --no-deps`, then portlayer itself, editable,
without dependencies, unless its wheel was among them. Then, each step timed:

1. the suite, in parallel (`pytest -v -n <cores - 4>`), with CUDA visible: the tests that mean a host without
   accelerators hide the devices themselves (tests/accelerator.py);
2. the bundled example as written, migrated neutral and torch, and through the drop-in: bitwise equal losses
   (tools/example_forms.py);
3. a parity run of each tiny preset compared at rtol 1e-5 with its H200 file, reference_train/baselines/
   <preset>.cuda-h200.json, run as it was recorded (1 rank, --grad-accum 2, 30 steps), and its bf16 run
   against <preset>.cuda-h200-bf16.json within the preset's committed bf16 band (reference_train/bands/);
   a preset without a committed file is skipped with a line that says so;
4. each strategy on one GPU where it can run (the ZeRO ones need DeepSpeed);
5. the trainer's throughput against HuggingFace's Trainer: gpt2, bf16, 16 x 1024 tokens a step, eager and
   --compile (bench/trainer_throughput.py; the figures in OUT/throughput.json).

The throughput bench runs first, alone on the device (its figures are timings). Then the suite and every check
start together and share the machine (they are verdicts, not timings): each writes OUT/<step>.log, whose last
lines go to the screen when it fails.
Target: 8 minutes on a 16-core machine with one GPU; the total is printed against it. Everything it wrote is
packed into OUT.tar.gz at the end. Where DeepSpeed is not installed, the suite skips the tests that need it
(PORTLAYER_TESTS_WITHOUT_DEEPSPEED=1, tests/conftest.py), saying so. `--dry-run` (a machine
without CUDA) says what it would install and run, and which checks it skips, and runs nothing. Exit 0 when
every step passed, 1 when one failed, 2 on unusable input (no CUDA without --dry-run, a missing --wheels folder).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BASELINES = REPO / "reference_train" / "baselines"
BANDS = REPO / "reference_train" / "bands"
TINY_PRESETS = ("gpt2-tiny", "bert-base-uncased-tiny", "mixtral-8x7b-tiny")
# As the H200 files were recorded (their README): one GPU, the 2-rank global batch by accumulation.
PARITY = ("--nproc", "1", "--grad-accum", "2", "--steps", "30")
ONE_GPU_STRATEGIES = ("ddp", "fsdp2")
DEEPSPEED_STRATEGIES = ("zero1", "zero2", "zero3")
# What the suite and the checks import beyond torch: the machine's own, or a wheel in --wheels.
NEEDED = ("pytest", "xdist", "click", "transformers", "tokenizers", "libcst", "datasets", "numpy")
TARGET_S = 8 * 60


@dataclass(frozen=True)
class Step:
    name: str
    command: tuple[str, ...]
    cuda_only: bool = True
    # Why this step cannot run on this machine (printed instead of running it), or None.
    skip: str | None = None
    # Runs beside the other concurrent steps, started together once the serial ones are done; waited for at the end.
    concurrent: bool = True


def portlayer(*args: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "portlayer", *args)


def install_steps(wheels: Path | None) -> list[Step]:
    pip = (sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--disable-pip-version-check")
    files = sorted(str(p) for p in wheels.iterdir() if p.suffix == ".whl") if wheels else []
    steps = [Step("install the carried wheels", (*pip, *files), cuda_only=False, concurrent=False)] if files else []
    if not any(Path(name).name.startswith("portlayer-") for name in files):
        steps.append(Step("install portlayer", (*pip, "--no-build-isolation", "-e", str(REPO)),
                          cuda_only=False, concurrent=False))  # fmt: skip
    return steps


def parity_steps(out: Path) -> list[Step]:
    """Each tiny preset against its H200 file: fp32 at the rounding floor, bf16 within the preset's bf16 band."""
    steps = []
    for preset in TINY_PRESETS:
        for precision in ("fp32", "bf16"):
            suffix = "" if precision == "fp32" else "-bf16"
            baseline = BASELINES / f"{preset}.cuda-h200{suffix}.json"
            band = BANDS / f"{preset}.bf16.json"
            tolerance = ("--rtol", "1e-5") if precision == "fp32" else ("--band", str(band))
            skip = None if baseline.is_file() else f"no {baseline.relative_to(REPO)} committed"
            if skip is None and precision == "bf16" and not band.is_file():
                skip = f"no {band.relative_to(REPO)} committed"
            run = out / f"{preset}.cuda{suffix}.json"
            command = portlayer("parity", "run", "--preset", preset, *PARITY, "--precision", precision, "--out", str(run))
            compare = portlayer("parity", "compare", str(baseline), str(run), *tolerance)
            # One step: the run, then its comparison (a shell `&&`, so that the lane's log shows both commands).
            steps.append(Step(f"parity {preset} {precision} vs H200",
                              ("sh", "-c", f"{shlex.join(command)} && {shlex.join(compare)}"), skip=skip))  # fmt: skip
    return steps


def has_deepspeed(wheels: Path | None) -> bool:
    """DeepSpeed installed here, or among the wheels the lane installs first (the plan is made before that)."""
    carried = wheels is not None and any(p.name.startswith("deepspeed-") for p in wheels.glob("*.whl"))
    return carried or importlib.util.find_spec("deepspeed") is not None


def strategy_steps(out: Path, deepspeed: bool) -> list[Step]:
    steps = []
    for strategy in ONE_GPU_STRATEGIES + DEEPSPEED_STRATEGIES:
        skip = None
        if strategy in DEEPSPEED_STRATEGIES and not deepspeed:
            skip = "DeepSpeed is not installed (carry its build in --wheels)"
        command = portlayer("parity", "run", "--preset", "gpt2-tiny", "--nproc", "1", "--steps", "5",
                            "--strategy", strategy, "--out", str(out / f"strategy-{strategy}.json"))  # fmt: skip
        steps.append(Step(f"strategy {strategy} on one GPU", command, skip=skip))
    return steps


def plan(wheels: Path | None, out: Path, deepspeed: bool) -> list[Step]:
    throughput = Step("trainer throughput vs HF Trainer, gpt2 bf16",
                      (sys.executable, str(REPO / "bench" / "trainer_throughput.py"), "--out", str(out / "throughput.json")),
                      concurrent=False)  # fmt: skip
    # Workers for all but the few cores the checks beside it keep busy.
    workers = str(max(2, (os.cpu_count() or 2) - 4))
    suite = Step("the suite, CUDA visible", (sys.executable, "-m", "pytest", "-v", "-n", workers, "--dist", "loadgroup",
                 "-p", "no:randomly", "-rfE", "--durations=30"), cuda_only=False)  # fmt: skip
    example = Step("the example in four forms", (sys.executable, str(REPO / "tools" / "example_forms.py")))
    # The bench first, alone on the device: the suite's processes would share it.
    return [*install_steps(wheels), throughput, suite, example, *parity_steps(out),
            *strategy_steps(out, deepspeed)]


def cuda_devices() -> list[str]:
    """The CUDA devices the machine's torch sees (none where torch or CUDA is missing)."""
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def describe_machine() -> list[str]:
    try:
        import torch

        lines = [f"torch {torch.__version__} at {Path(torch.__file__).parent} (the machine's own)"]
    except ImportError:
        lines = ["torch: not installed (the lane uses the machine's own)"]
    devices = cuda_devices()
    lines.append(f"CUDA devices: {', '.join(devices) if devices else 'none'}")
    missing = [name for name in NEEDED if importlib.util.find_spec(name) is None]
    if missing:
        lines.append(f"not installed here: {', '.join(missing)} (carry their wheels: --wheels DIR)")
    return lines


def start(step: Step, env: dict, log: Path | None) -> subprocess.Popen:
    """`step` started, its output to `log` (the child keeps the file open), or to the screen without one."""
    if log is None:
        return subprocess.Popen(step.command, cwd=REPO, env=env)
    with log.open("w") as output:
        return subprocess.Popen(step.command, cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT)


def finish(step: Step, process: subprocess.Popen, began: float, log: Path | None) -> bool:
    ok = process.wait() == 0
    where = f" (output in {log})" if log else ""
    print(f"== {step.name}: {'passed' if ok else 'FAILED'} in {time.monotonic() - began:.0f} s{where}", flush=True)
    if not ok and log:
        print("\n".join(log.read_text(errors="replace").splitlines()[-40:]), flush=True)
    return ok


def log_name(step: Step) -> str:
    return "".join(c if c.isalnum() or c in "-." else "-" for c in step.name).strip("-") + ".log"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, help="a folder of wheels to install first (--no-index --no-deps)")
    parser.add_argument("--out", type=Path, default=REPO / "gpu-lane", help="run files go here [gpu-lane/]")
    parser.add_argument("--dry-run", action="store_true", help="say what would run; run nothing")
    args = parser.parse_args(argv)
    if args.wheels is not None and not args.wheels.is_dir():
        print(f"gpu_lane: error: --wheels {args.wheels}: no such folder", file=sys.stderr)
        return 2
    if not args.dry_run and not cuda_devices():
        print("gpu_lane: error: no CUDA device on this machine; --dry-run says what the lane would run", file=sys.stderr)
        return 2
    for line in describe_machine():
        print(line)
    deepspeed = has_deepspeed(args.wheels)
    return execute(plan(args.wheels, args.out, deepspeed), args.out, args.dry_run, deepspeed)


def execute(steps: list[Step], out: Path, dry_run: bool, deepspeed: bool) -> int:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env.pop("PORTLAYER_BACKEND", None)  # the probe finds CUDA, as a user's run does
    if not deepspeed:
        env["PORTLAYER_TESTS_WITHOUT_DEEPSPEED"] = "1"  # the suite skips what needs it, saying so (tests/conftest.py)
    if not dry_run:
        out.mkdir(parents=True, exist_ok=True)
    failed, began, running = [], time.monotonic(), []
    for step in steps:
        print(f"== {step.name}: {shlex.join(step.command)}", flush=True)
        if step.skip or (dry_run and step.cuda_only):
            print(f"   skipped: {step.skip or 'dry run, no CUDA device'}")
            continue
        if dry_run:
            print(f"   would run (dry run){', beside the others' if step.concurrent else ''}")
            continue
        if step.concurrent:
            log = out / log_name(step)
            running.append((step, start(step, env, log), time.monotonic(), log))
            print(f"   started (output in {log})", flush=True)
        elif not finish(step, start(step, env, None), time.monotonic(), None):
            failed.append(step.name)
    failed += [step.name for step, process, since, log in running if not finish(step, process, since, log)]
    if dry_run:
        print(f"dry run: {len(steps)} steps planned, nothing run")
        return 0
    print(f"total {time.monotonic() - began:.0f} s (target {TARGET_S} s); failed: {', '.join(failed) or 'none'}")
    # One file to bring back: a lent machine's tool may return only a few files, and its folder goes with it.
    archive = shutil.make_archive(str(out), "gztar", root_dir=out)
    print(f"run files and logs: {archive}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
