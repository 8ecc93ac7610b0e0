"""The main job, end to end, on this machine's cpu (`make demo`):

1. copy a CUDA + NCCL training script (examples/cuda_ddp_train.py) into a temporary folder,
2. `portlayer migrate` it (showing the diff first),
3. train the migrated script on 2 processes with torchrun,
4. record a parity run of the gpt2-tiny reference model with `portlayer parity run`,
5. hold it to the committed baseline with `portlayer parity compare`, printing the table and writing the plot,
6. migrate the example to Ascend's API (`--target npu`) and train it on a STAND-IN npu: the test suite's
   stand-in device (tests/fake_plugins/), cpu kernels behind torch's PrivateUse1 slot registered as
   torch_npu registers, not Ascend hardware.

Each step runs the command a user would type and stops the demo with its exit status if it fails.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from portlayer.train.process_group import ProcessGroup
from portlayer.train.runfile import read_run

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "cuda_ddp_train.py"
OUTPUT = REPO / "runs" / "demo"
PRESET = "gpt2-tiny"
NPROC = 2
STEPS_SHOWN = 6
STEP_TIMEOUT_S = 300
# The commands the demo runs live next to the interpreter running it (the project's virtualenv).
BIN = Path(sys.executable).parent

# Nothing here may reach the network: models are built from configs, tokenizers trained locally.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


class StepFailed(Exception):
    pass


def main() -> int:
    started = time.perf_counter()
    env = {**os.environ, **OFFLINE}
    baseline = pick_baseline()
    OUTPUT.mkdir(parents=True, exist_ok=True)
    try:
        migrate_and_train_the_cuda_example(env)
        record_and_compare_a_parity_run(env, baseline)
        heading(6, "migrate it to Ascend (--target npu) and train it on a STAND-IN npu (not Ascend hardware)")
        train_on_the_stand_in_npu(env)
    except StepFailed as failure:
        print(f"\ndemo FAILED: {failure}", file=sys.stderr)
        return 1
    print(
        f"\ndemo done in {time.perf_counter() - started:.0f} s; run file and plot in {OUTPUT.relative_to(REPO)}/"
    )
    return 0


def migrate_and_train_the_cuda_example(env: dict) -> None:
    """Steps 1 to 3: the CUDA example copied, migrated (diff, in place, checked) and trained with torchrun."""
    with tempfile.TemporaryDirectory(prefix="portlayer-demo-") as workdir:
        script = Path(workdir) / "train.py"
        heading(1, f"copy the CUDA example into {workdir}")
        shutil.copy(EXAMPLE, script)
        print(f"  {EXAMPLE.relative_to(REPO)} -> {script}  (uses nccl, torch.cuda.*, .cuda(), cuda:N)")

        heading(2, "migrate it off CUDA: first the diff, then in place, then check it is done")
        run(env, "portlayer", "migrate", "--diff", script, ok=(0, 1))
        run(env, "portlayer", "migrate", script)
        run(env, "portlayer", "migrate", "--check", script)

        heading(3, f"train the migrated script on {NPROC} cpu processes")
        losses = Path(workdir) / "losses.json"
        # --standalone: a free rendezvous port, so the demo never joins another job on the default one.
        run(env, "torchrun", "--standalone", "--nproc_per_node", NPROC, script, "--steps", 10,
            "--losses_out", losses)  # fmt: skip
        print(f"  the migrated script ran {len(json.loads(losses.read_text()))} DDP steps on the cpu")


def record_and_compare_a_parity_run(env: dict, baseline: Path) -> None:
    """Steps 4 and 5: `portlayer parity run` over as many steps as the baseline has, then `parity compare`."""
    steps = read_run(baseline)["metadata"]["steps"]
    run_file, plot = OUTPUT / f"{PRESET}.json", OUTPUT / f"{PRESET}.parity.png"
    heading(4, f"record a parity run of {PRESET} on {NPROC} cpu processes ({steps} steps)")
    run(env, "portlayer", "parity", "run", "--preset", PRESET, "--nproc", NPROC, "--steps", steps,
        "--out", run_file)  # fmt: skip

    heading(5, f"hold it to the committed baseline {baseline.relative_to(REPO)}")
    run(env, "portlayer", "parity", "compare", baseline, run_file, "--plot", plot)


def train_on_the_stand_in_npu(env: dict) -> None:
    """The vendor-API port running end to end: `import torch_npu`, npu:N tensors, hccl under DDP."""
    sys.path.insert(0, str(REPO))
    from tests import fake_device

    print("  STAND-IN DEVICE: tensors live on npu:0 / npu:1 but compute with the cpu's kernels, and hccl is")
    print("  gloo underneath. It proves the migrated code's path (torch_npu's API, device placement, DDP,")
    print("  amp, checkpoints); only Ascend hardware can prove Ascend's kernels, HCCL and speed.")
    print(f"  (the stand-in is compiled once on first use: {fake_device.build().name})")
    with tempfile.TemporaryDirectory(prefix="portlayer-demo-npu-") as workdir:
        script = Path(workdir) / "train_npu.py"
        shutil.copy(EXAMPLE, script)
        run(env, "portlayer", "migrate", "--target", "npu", script)
        losses = Path(workdir) / "losses.json"
        stand_in = fake_device.environment("npu", env)
        run(stand_in, "torchrun", "--standalone", "--nproc_per_node", NPROC, script, "--steps", 10,
            "--losses_out", losses)  # fmt: skip
        print(f"  the npu port ran {len(json.loads(losses.read_text()))} DDP steps on the STAND-IN npu (hccl)")


def pick_baseline() -> Path:
    """The committed fp32 baseline for the preset (the demo's run is fp32), from an accelerator when there is one
    (a stronger claim than cpu against cpu): as `portlayer parity check` picks it."""
    from portlayer.cli import UnusableInput
    from portlayer.train.parity_check import choose_baseline

    try:
        return choose_baseline(PRESET, "fp32").path
    except UnusableInput as exc:
        sys.exit(f"demo: {exc.message}")


def heading(number: int, text: str) -> None:
    print(f"\n== {number}/{STEPS_SHOWN}  {text}", flush=True)


def run(env: dict, command: str, *args, ok: tuple[int, ...] = (0,)) -> None:
    """Run one of the project's commands from the repository root as a user would, echoing it; raise
    StepFailed on a bad exit."""
    words = [command, *map(shown, args)]
    print("$ " + shlex.join(words), flush=True)
    program = BIN / command
    if not program.exists():
        raise StepFailed(f"{program} is missing: install the project first (make venv)")
    # A group of its own, so a step that hangs (a stuck rank) is ended with every process it started.
    with ProcessGroup([str(program), *words[1:]], env=env, cwd=REPO) as group:
        try:
            group.communicate(STEP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise StepFailed(f"`{shlex.join(words)}` did not finish in {STEP_TIMEOUT_S} s") from None
    status = group.process.returncode
    if status not in ok:
        raise StepFailed(f"`{shlex.join(words)}` exited {status}")


def shown(arg) -> str:
    """Paths inside the repository relative to it (the commands run there), anything else as it is."""
    if isinstance(arg, Path) and arg.is_relative_to(REPO):
        return str(arg.relative_to(REPO))
    return str(arg)


if __name__ == "__main__":
    sys.exit(main())
