"""Run after migrate: CUDA training programs in the shapes people copy (programs/), ported to each target,
must train on this machine — in one process, and those with a distributed path also as a 2-process
torchrun job (a program that only runs under torchrun: as the 2-process job alone) — and exit 0.

What "train" means here: every run exits 0, prints at least three finite losses, and the last is clearly
below the first (a resumed run continues the list). Beyond the loss, each program states what it must and
must not print once ported: where it runs (placement), and no accelerator-only path switched on (a "you
have a CUDA device" warning on a host whose active backend is the cpu). On the stand-in npu and musa,
every training process must also have allocated memory on the device (launch.finish): a port that falls
back to the host cpu fails, whatever its exit code and its losses.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.run_after_migrate import public_programs
from tests.run_after_migrate.launch import (
    PROGRAMS,
    PUBLIC,
    TARGETS,
    Target,
    assert_trains,
    finish,
    losses,
    start,
)

# Programs run on the four ways a port is made: the migrate targets neutral, torch and npu (on the stand-in),
# and the drop-in. One program, gpt_loop, also runs on musa and through the drop-in on the stand-in npu: on the
# stand-in, musa differs from the npu only in its names (its module, device type and collective), which one
# program's run shows as well as six; each later program would pay another two runs to show it again.
FOUR_WAYS = ("neutral", "torch", "dropin", "npu")
EVERY_TARGET = tuple(str(target) for target in TARGETS)


@dataclass(frozen=True)
class Program:
    # The script to run: a file of programs/, or, for a public program (public/), the entry script of its
    # folder, all of whose files are copied and ported together.
    file: str
    # Each run's arguments (paths relative to the run's folder); later runs resume from the earlier ones.
    runs: tuple[tuple[str, ...], ...]
    # It runs under torchrun only: it reads LOCAL_RANK, as the DDP tutorial does. Its 2-process job runs the
    # code a 1-process job would, and more (a 1-process job is a process group of one).
    torchrun_only: bool = False
    # It has a distributed path (DDP, a process group): also run as a 2-process torchrun job. A program
    # without one would only run twice, side by side, under torchrun: one process says all.
    distributed: bool = True
    # Lines the output must hold ({device_type}: the target's), and strings it must not.
    says: tuple[str, ...] = ()
    never_says: tuple[str, ...] = ()
    # Writes the data the program reads into its run folder (public programs download theirs).
    synthesise: Callable[[Path], None] | None = None
    public: bool = False
    # It prints its training losses (a program that prints none is held to `says` and, on the stand-in
    # device, to having trained there).
    prints_losses: bool = True
    # The targets it runs on.
    targets: tuple[str, ...] = FOUR_WAYS

    def __str__(self) -> str:
        return Path(self.file).parent.name if self.public else self.file.removesuffix(".py")

    def copy_to(self, folder: Path) -> Path:
        """The program's files, as published, in `folder`; returns the script's path there."""
        if self.public:
            source = PUBLIC / Path(self.file).parent
            shutil.copytree(source, folder, ignore=shutil.ignore_patterns(*public_programs.NOT_THE_PROGRAM))
        else:
            folder.mkdir()
            shutil.copyfile(PROGRAMS / self.file, folder / self.file)
        return folder / Path(self.file).name


# Placement: each program prints where its model's parameters live; they must be on the target's device.
PLACED = "model on {device_type}"

ALL = (
    Program("gpt_loop.py", (("out",),), says=("resumed checkpoint at iter 15", PLACED), targets=EVERY_TARGET),
    Program(
        "ddp_snapshot.py",
        (("3", "1", "--snapshot_path", "snapshot.pt"), ("5", "1", "--snapshot_path", "snapshot.pt")),
        torchrun_only=True,
        says=("Resuming training from snapshot at Epoch 3", PLACED),
    ),
    Program("auto_trainer.py", ((),), distributed=False, says=(PLACED,)),
    Program(
        "cuda_flag.py",
        (("--cuda", "--save", "model.pt"),),
        distributed=False,
        says=("end of training", PLACED),
        never_says=("You have a CUDA device",),
    ),
    Program("hf_trainer.py", (("out",),), says=("generated: the cat", PLACED)),
    # Public programs, as published (public/*/SOURCE.txt), with tiny-config arguments and synthesised data.
    Program(
        "word_language_model/main.py",
        ((*public_programs.WORD_LANGUAGE_MODEL_TINY, "--cuda", "--save", "model.pt"),),
        distributed=False,
        says=("End of training",),
        never_says=("You have a CUDA device",),
        synthesise=public_programs.wikitext_like,
        public=True,
        targets=FOUR_WAYS,
    ),
    Program(
        "accelerate_nlp_example/nlp_example.py",
        ((),),
        distributed=False,
        says=("epoch 2: {{'accuracy'",),
        synthesise=public_programs.glue_mrpc_offline,
        public=True,
        prints_losses=False,
        targets=FOUR_WAYS,
    ),
    Program(
        "ddp_example/example.py",
        # Two local ranks share the stand-in's two devices: one each (in one process, rank 0 takes the first).
        (("--local_world_size", "2"),),
        torchrun_only=True,
        says=("rank = 0",),
        public=True,
        prints_losses=False,
        # Through the drop-in on the stand-in npu, not on this cpu host: there `torch.cuda.device_count()`
        # answers 0, as torch.cuda does without CUDA (docs/dropin.md), and the program divides
        # it into an empty list of devices, which the unported program does on such a host too. Only
        # migrate sees that the count feeds placement arithmetic (#23).
        targets=("neutral", "torch", "npu", "dropin-npu"),
    ),
)


# Pairs not in the matrix, and why. The stand-in vendor device (tests/fake_device.py) lacks kernels that
# some programs need: the LSTM (cuda_flag); transformers, finding torch_npu, imports
# `torch_npu.npu_fusion_attention`, and the Trainer's barrier finds no hccl/mccl backend for the device
# type (hf_trainer). With the drop-in, `TrainingArguments(ddp_backend="nccl")` is a string handed to
# transformers, which checks it against the npu before any patched torch call sees it (docs/dropin.md).
STAND_IN_LACKS = {
    (program, target) for program in ("cuda_flag", "hf_trainer") for target in ("npu", "musa", "dropin-npu")
}

MATRIX = [
    pytest.param(program, target, id=f"{program}-{target}")
    for program in ALL
    for target in TARGETS
    if (str(program), str(target)) not in STAND_IN_LACKS
    and str(target) in program.targets
]


@pytest.mark.parametrize(("program", "target"), MATRIX)
def test_ported_program_trains_in_one_process_and_under_torchrun(program: Program, target: Target, tmp_path):
    prepared = program.copy_to(tmp_path / "ported")
    target.prepare(prepared)

    modes = {} if program.torchrun_only else {"one process": None}
    if program.distributed:
        modes["torchrun x2"] = 2
    scripts = {}
    for mode in modes:
        folder = tmp_path / mode.replace(" ", "_")
        shutil.copytree(prepared.parent, folder)
        if program.synthesise:
            program.synthesise(folder)
        scripts[mode] = folder / prepared.name

    outputs = dict.fromkeys(modes, "")
    for args in program.runs:
        # Both modes side by side: half the wait on a 2-core machine.
        running = {mode: start(scripts[mode], list(args), target, nproc) for mode, nproc in modes.items()}
        for mode, run in running.items():
            outputs[mode] += finish(run, f"{program} ({target}, {mode}, args {args})")

    for mode, output in outputs.items():
        what = f"{program} ({target}, {mode})"
        if program.prints_losses:
            assert_trains(losses(output), what)
        for line in program.says:
            assert line.format(device_type=target.device_type) in output, (
                f"{what}: no {line!r}\n{output[-3000:]}"
            )
        for text in program.never_says:
            assert text not in output, f"{what}: printed {text!r}\n{output[-3000:]}"
