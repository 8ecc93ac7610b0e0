"""`portlayer parity run --preset P --nproc N --steps S --out RUN.json [TRAINER OPTIONS…]`.

Launches `torchrun --nproc_per_node N -m portlayer.train --parity …` on the active backend, shows the
trainer's own output (not torchrun's), and on failure exits 1 with one line: the first rank's error.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
from portlayer.train.presets import PRESETS

# torchrun's own log records ("W1123 10:53:36.123000 4321 torch/distributed/…] …") and its failure report.
_TORCHRUN_LOG = re.compile(r"^\[?[IWEF]\d{4} \d\d:\d\d:\d\d")
_TRAINER_ERROR = "portlayer.train: "


def torchrun_command(
    preset: str, nproc: int, steps: int | None, out: Path, extra: tuple[str, ...]
) -> list[str]:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    command += ["-m", "portlayer.train", "--preset", preset, "--parity", "--out", str(out)]
    if steps is not None:
        command += ["--steps", str(steps)]
    return command + list(extra)


def _environment(nproc: int) -> dict:
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    # torchrun sets 1 thread per rank (and says so) when unset; share the cores out instead.
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    return env


def launch(command: list[str], env: dict, echo) -> tuple[int, str | None]:
    """Run `command`, echo the trainer's lines; (exit status, the first rank's error line or None)."""
    first_error = None
    in_report = False
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, bufsize=1
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            line = line.rstrip("\n")
            if line.startswith(_TRAINER_ERROR):
                first_error = first_error or line[len(_TRAINER_ERROR) :]
                continue
            # After a rank fails, torchrun prints a traceback and a report of its own: not the user's news.
            in_report = in_report or line.startswith(("Traceback", "====="))
            if not in_report and not _TORCHRUN_LOG.match(line):
                echo(line)
        status = process.wait()
    return status, first_error


@click.command(
    "run", context_settings={"ignore_unknown_options": True, "help_option_names": ["-h", "--help"]}
)
@click.option("--preset", required=True, type=click.Choice(list(PRESETS)), help="Model preset.")
@click.option("--nproc", default=1, show_default=True, type=click.IntRange(min=1), help="Processes (ranks).")
@click.option("--steps", type=click.IntRange(min=1), help="Optimizer steps [preset's default].")
@click.option(
    "--out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Run file to write."
)
@click.argument("trainer_options", nargs=-1, type=click.UNPROCESSED)
def run(preset: str, nproc: int, steps: int | None, out: Path, trainer_options: tuple[str, ...]) -> None:
    """Train PRESET in parity mode with torchrun and record the per-step losses to a run file.

    Other options go to the trainer (`python -m portlayer.train --help`), e.g. `--grad-accum 2`.
    """
    command = torchrun_command(preset, nproc, steps, out, trainer_options)
    status, error = launch(command, _environment(nproc), click.echo)
    if status != 0:
        reason = error or f"torchrun exited with status {status}"
        raise click.ClickException(f"parity run of {preset} on {nproc} process(es) failed: {reason}")


if __name__ == "__main__":
    run(prog_name="python -m portlayer.train.parity_run")
