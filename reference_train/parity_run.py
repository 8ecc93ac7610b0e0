"""`portlayer parity run --preset P --nproc N --steps S --out RUN.json [TRAINER OPTIONS…]`.

Launches `torchrun --nproc_per_node N -m portlayer.train --parity …` on the active backend, with the ranks forked
from one import of torch (`portlayer.train.launch`). It shows the trainer's own output (not torchrun's) and a bar
over the steps on a terminal, and on failure exits 1 with one line: the error of the rank that failed first.
Everything that can be checked before training is: the trainer's options (a misspelt one is one line and exit 2),
the tensor-parallel layout's sizes, and that --out can be written. Ctrl-C stops torchrun and every rank it started (SIGTERM, then SIGKILL for what is
left after STOP_GRACE_S; a second Ctrl-C kills at once), and exits 130. --nnodes / --node-rank / --rdzv-* go to
torchrun as they are, for multi-node runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from portlayer.cli import UnusableInput
from portlayer.errors import PortlayerError, error_line
from portlayer.strategies.layout import Layout
from portlayer.train.presets import PRESETS, build_config, get_preset, read_override_file
from portlayer.train.process_group import ProcessGroup
from portlayer.train.progress import STEP_EVENTS_ENV, StepBar

# torchrun's own log records ("W1123 10:53:36.123000 4321 torch/distributed/…] …") and its failure report.
_TORCHRUN_LOG = re.compile(r"^\[?[IWEF]\d{4} \d\d:\d\d:\d\d")
# A rank's error line: `portlayer: error: rank R: …` (the trainer reports through `error_line` too).
_ERROR_PREFIX = error_line("")
_RANK_ERROR = _ERROR_PREFIX + "rank "
# torchrun's failure report: each failed rank's `rank      : R (local_rank: L)`, and for one a signal ended,
# `traceback : Signal 9 (SIGKILL) received by PID 123`.
_REPORTED_RANK = re.compile(r"^\s*rank\s*: (\d+) ")
_KILLED_BY_SIGNAL = re.compile(r"^\s*traceback\s*: Signal (\d+) \((\w+)\) received by PID")
# How a collective fails on the ranks that are left when a peer process dies: gloo's socket errors, NCCL's (and its
# vendors' copies') words for a communicator or a remote rank that went away.
_PEER_DIED = re.compile(
    r"Connection (reset|closed) by peer|Broken pipe|remote process exited|communicator was aborted", re.IGNORECASE
)
# After the first Ctrl-C, how long torchrun and its ranks get to exit on SIGTERM before they are killed: the
# promise is that `parity run` and every process it started are gone within STOP_GRACE_S + 5 s.
STOP_GRACE_S = 15.0
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a Ctrl-C


class Interrupted(click.ClickException):
    exit_code = EXIT_INTERRUPTED


def torchrun_command(
    preset: str,
    nproc: int,
    steps: int | None,
    out: Path,
    extra: tuple[str, ...],
    nodes: dict[str, str | None] | None = None,
) -> list[str]:
    """The launch: torchrun's options for one node (`--standalone`, a free port) unless a multi-node option is
    given, then the trainer's, through `portlayer.train.launch` (torchrun, with ranks forked from one import)."""
    given = {name: value for name, value in (nodes or {}).items() if value is not None}
    command = [sys.executable, "-m", "portlayer.train.launch", f"--nproc_per_node={nproc}"]
    if given:
        command += [f"--{name.replace('_', '-')}={value}" for name, value in given.items()]
    else:
        command.append("--standalone")
    return [*command, "--", *trainer_arguments(preset, steps, out, extra)]


def trainer_arguments(preset: str, steps: int | None, out: Path, extra: tuple[str, ...]) -> list[str]:
    arguments = ["--preset", preset, "--parity", "--out", str(out)]
    if steps is not None:
        arguments += ["--steps", str(steps)]
    return arguments + list(extra)


def check_trainer_arguments(arguments: list[str], command: str = "portlayer parity run") -> click.Context:
    """Parse the trainer's arguments as the ranks will, so a misspelt option fails here, before torchrun; the
    parsed context (which options were given, their values)."""
    from portlayer.train.__main__ import main as trainer

    return trainer.make_context(command, list(arguments))


def check_writable(out: Path) -> None:
    """Fail before training when the run file could not be written after it."""
    if out.is_dir():
        raise UnusableInput(f"--out {out} is a directory; name the run file, e.g. {out / 'run.json'}")
    folder = out.parent
    if not folder.is_dir():
        raise UnusableInput(f"--out {out}: no such directory {folder}")
    try:
        # The run file is written atomically through a temporary file beside it: try exactly that.
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{out.name}.", suffix=".check"):
            pass
    except OSError as exc:
        raise UnusableInput(f"--out {out}: cannot write to {folder}: {exc.strerror or exc}") from None
    if out.exists() and not os.access(out, os.W_OK):
        raise UnusableInput(f"--out {out}: the file exists and is not writable")


def _environment(nproc: int) -> dict:
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    # torchrun sets 1 thread per rank (and says so) when unset; share the cores out instead.
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    env[STEP_EVENTS_ENV] = "1"
    return env


def launch(command: list[str], env: dict, line) -> tuple[int, str | None]:
    """Run `command` in a process group of its own, pass each of the trainer's lines to `line`; (exit status,
    the error of the rank that failed first, as `root_cause` finds it, or None). Ctrl-C stops the whole group
    (`ProcessGroup.stopped_by_ctrl_c`), and KeyboardInterrupt is raised once it has ended."""
    errors = []
    in_report, reported_rank = False, None
    # A group of its own: stopped as one, and the terminal's Ctrl-C comes to us alone.
    popen = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True, "env": env, "bufsize": 1}
    with ProcessGroup(command, **popen) as group, group.stopped_by_ctrl_c(STOP_GRACE_S):
        for text in group.process.stdout:
            text = text.rstrip("\n")
            # The ranks share one pipe: a rank's error line can land after another rank's unfinished line.
            at = text.find(_RANK_ERROR)
            if at >= 0:
                errors.append(text[at + len(_ERROR_PREFIX) :])
                text = text[:at]
                if not text:
                    continue
            # After a rank fails, torchrun prints a traceback and a report of its own: not the user's news, but
            # the only word of a rank killed by a signal (the OOM killer's SIGKILL), which prints nothing itself.
            in_report = in_report or text.startswith(("Traceback", "====="))
            if in_report:
                reported_rank = _REPORTED_RANK.match(text) or reported_rank
                killed = _KILLED_BY_SIGNAL.match(text)
                if killed and reported_rank:
                    errors.append(f"rank {reported_rank[1]}: killed by {killed[2]} (signal {killed[1]})")
            elif not _TORCHRUN_LOG.match(text):
                line(text)
        status = group.process.wait()
    if group.interrupts:
        raise KeyboardInterrupt
    return status, root_cause(errors)


def root_cause(errors: list[str]) -> str | None:
    """Of the ranks' error lines in the order they came, the first that is not the echo of a peer's death (a
    reset connection, an aborted communicator): when one rank dies, the others fail in their next collective,
    and those lines may come first."""
    return next((error for error in errors if not _PEER_DIED.search(error)), errors[0] if errors else None)


def check_layout(trainer: dict, nproc: int, nnodes: str | None) -> None:
    """The model-parallel layout (the trainer's parsed options), before any rank starts: the world size divides by
    --tp x --pp, the model's heads by --tp and its layers by --pp, the sequence by --tp under --sp, and the strategy,
    --compile and --grad-accum compose with it; or one line and exit 2."""
    layout = Layout(trainer["tensor_parallel"], trainer["pipeline_parallel"], trainer["sequence_parallel"],
                    trainer["pipeline_schedule"])  # fmt: skip
    try:
        if nnodes is None or nnodes.isdigit():  # an elastic MIN:MAX world is known only at the rendezvous
            layout.data_parallel(nproc * int(nnodes or 1))
        layout.check_training(trainer["strategy"], trainer["compile"], trainer["grad_accum"])
        if not layout.splits:
            return
        preset = get_preset(trainer["preset"])
        layout.check_sequence(trainer["seq_len"] or preset.seq_len)
        overrides = read_override_file(trainer["override_config"]) if trainer["override_config"] else None
        config, _ = build_config(
            preset,
            config_overrides=overrides,
            model_name_or_path=trainer["model_name_or_path"],
            trust_remote_code=trainer["trust_remote_code"],
        )
        layout.check_model(config)
    except PortlayerError as exc:
        raise UnusableInput(str(exc)) from None


def _check_nodes(nodes: dict[str, str | None]) -> None:
    nnodes = nodes["nnodes"]
    if nnodes is not None and not re.fullmatch(r"\d+(:\d+)?", nnodes):
        raise UnusableInput(f"--nnodes {nnodes}: expected N or MIN:MAX, as torchrun takes it")
    if nnodes not in (None, "1", "1:1") and nodes["rdzv_endpoint"] is None:
        raise UnusableInput(f"--nnodes {nnodes} needs --rdzv-endpoint HOST:PORT, the same on every node")


@click.command(
    "run", context_settings={"ignore_unknown_options": True, "help_option_names": ["-h", "--help"]}
)
@click.option("--preset", required=True, type=click.Choice(list(PRESETS)), help="Model preset.")
@click.option(
    "--nproc", default=1, show_default=True, type=click.IntRange(min=1), help="Processes (ranks) per node."
)
@click.option("--steps", type=click.IntRange(min=1), help="Optimizer steps [preset's default].")
@click.option(
    "--out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Run file to write."
)
@click.option("--nnodes", help="torchrun: number of nodes, N or MIN:MAX [1, standalone].")
@click.option("--node-rank", "node_rank", type=click.IntRange(min=0), help="torchrun: this node's rank.")
@click.option("--rdzv-endpoint", "rdzv_endpoint", metavar="HOST:PORT", help="torchrun: the rendezvous.")
@click.option("--rdzv-backend", "rdzv_backend", help="torchrun: rendezvous backend (c10d, static, …).")
@click.option("--rdzv-id", "rdzv_id", help="torchrun: job id, the same on every node.")
@click.argument("trainer_options", nargs=-1, type=click.UNPROCESSED)
def run(
    preset: str, nproc: int, steps: int | None, out: Path, trainer_options: tuple[str, ...], **nodes
) -> None:
    """Train PRESET in parity mode with torchrun and record the per-step losses to a run file.

    Other options go to the trainer (`python -m portlayer.train --help`), e.g. `--grad-accum 2`.
    """
    _check_nodes(nodes)
    trainer = check_trainer_arguments(trainer_arguments(preset, steps, out, trainer_options))
    check_layout(trainer.params, nproc, nodes["nnodes"])
    check_writable(out)
    command = torchrun_command(preset, nproc, steps, out, trainer_options, nodes)
    bar = StepBar(steps or get_preset(preset).default_steps, preset)
    try:
        status, error = launch(command, _environment(nproc), lambda text: bar.line(text, click.echo))
    except KeyboardInterrupt:
        bar.close()
        raise Interrupted(f"interrupted: stopped the parity run of {preset} and its ranks") from None
    bar.close()
    if status != 0:
        reason = error or f"torchrun exited with status {status}"
        raise click.ClickException(f"parity run of {preset} on {nproc} process(es) failed: {reason}")


if __name__ == "__main__":
    run(prog_name="python -m portlayer.train.parity_run")
