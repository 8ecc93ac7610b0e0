"""`torchrun --nproc_per_node N -m portlayer.train --preset P …` (or `python -m portlayer.train` for one process,
or `deepspeed --num_gpus N --module portlayer.train …`)."""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

import click

from portlayer.errors import PortlayerError, first_line, print_error
from portlayer.precision import FP32, PRECISIONS
from portlayer.strategies import DEFAULT as DEFAULT_STRATEGY
from portlayer.strategies import STRATEGIES
from portlayer.strategies.layout import PIPELINE_SCHEDULES
from portlayer.train.presets import PRESETS, get_preset

FAULT_KINDS = ("exit", "hang")


def parse_fault(ctx, param, value):
    """`KIND@STEP:RANK`, e.g. `exit@5:1` (rank 1 dies at step 5) or `hang@3:0`."""
    if value is None:
        return None
    try:
        kind, rest = value.split("@")
        step, rank = rest.split(":")
        if kind not in FAULT_KINDS:
            raise ValueError
        return kind, int(step), int(rank)
    except ValueError:
        raise click.BadParameter(
            f"expected KIND@STEP:RANK with KIND one of {', '.join(FAULT_KINDS)}"
        ) from None


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--preset", required=True, type=click.Choice(list(PRESETS)), help="Model preset.")
@click.option("--steps", type=click.IntRange(min=1), help="Optimizer steps [preset's default].")
@click.option(
    "--schedule-steps",
    type=click.IntRange(min=1),
    help="Steps the lr schedule spans; --steps may stop before [preset's default, or --steps if longer].",
)
@click.option(
    "--per-device-batch", "per_device_batch", type=click.IntRange(min=1), help="Micro-batch per rank."
)
@click.option(
    "--grad-accum", default=1, show_default=True, type=click.IntRange(min=1), help="Micro-batches per step."
)
@click.option("--seq-len", type=click.IntRange(min=4), help="Tokens per sample [preset's].")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), help="Peak learning rate [preset's].")
@click.option("--warmup-steps", type=click.IntRange(min=0), help="Linear warm-up steps [preset's].")
@click.option("--seed", default=0, show_default=True, help="Seed of the weights, data order and masking.")
@click.option("--precision", type=click.Choice(list(PRECISIONS)), default=FP32.name, show_default=True)
@click.option(
    "--strategy",
    type=click.Choice(list(STRATEGIES)),
    default=DEFAULT_STRATEGY,
    show_default=True,
    help="Data parallelism: ddp, fsdp2 (torch's fully_shard) or zero1/2/3 (DeepSpeed; the [deepspeed] extra).",
)
@click.option(
    "--tp",
    "--tensor-model-parallel-size",
    "tensor_parallel",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Tensor parallel: split each block's matmuls over this many consecutive ranks (Megatron's); --strategy "
    "is data parallel over the copies.",
)
@click.option(
    "--sp",
    "--sequence-parallel",
    "sequence_parallel",
    is_flag=True,
    help="Sequence parallel (with --tp): outside the split matmuls, each --tp rank keeps 1/tp of the sequence.",
)
@click.option(
    "--pp",
    "--pipeline-model-parallel-size",
    "pipeline_parallel",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Pipeline parallel: split the blocks into this many stages; --grad-accum micro-batches flow through them.",
)
@click.option(
    "--pp-schedule",
    "pipeline_schedule",
    type=click.Choice(PIPELINE_SCHEDULES),
    default=PIPELINE_SCHEDULES[0],
    show_default=True,
    help="The pipeline's schedule (torch.distributed.pipelining): 1F1B, or GPipe (all forwards, then backwards).",
)
@click.option(
    "--tf32/--no-tf32", default=False, show_default=True, help="Allow TF32 matmuls (never in parity mode)."
)
@click.option(
    "--compile/--no-compile",
    default=False,
    show_default=True,
    help="torch.compile the model: faster steps after a first one that compiles (parity runs too, if asked).",
)
@click.option(
    "--parity/--no-parity",
    default=False,
    show_default=True,
    help="Parity mode: dropout off, no TF32, deterministic algorithms, eager attention (any --precision).",
)
@click.option(
    "--keep-dropout", is_flag=True, help="Parity mode but dropout left on (shows what parity prevents)."
)
@click.option(
    "--perturb-init",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Move each initial weight one ulp up or down, at random from this seed (0: not at all): a correct "
    "port's rounding, for `portlayer parity band`.",
)
@click.option(
    "--override-config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="JSON object of model config fields to override (type-checked).",
)
@click.option(
    "--model_name_or_path", "--model-name-or-path", "model_name_or_path", help="Local checkpoint or hub name."
)
@click.option("--trust-remote-code", is_flag=True, help="Allow a checkpoint's own modelling code to run.")
@click.option(
    "--data",
    type=click.Path(exists=True, path_type=Path),
    help="Your own .txt/.json/.jsonl/.parquet file or folder (a 'text' column) [built-in corpus].",
)
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the run file here (JSON)."
)
@click.option(
    "--checkpoint-dir", type=click.Path(file_okay=False, path_type=Path), help="Save checkpoints here."
)
@click.option(
    "--save-every", default=0, show_default=True, type=click.IntRange(min=0), help="Checkpoint every N steps."
)
@click.option("--resume", is_flag=True, help="Continue from the newest checkpoint in --checkpoint-dir.")
@click.option(
    "--timeout",
    "timeout_s",
    default=600.0,
    show_default=True,
    type=click.FloatRange(min=1),
    help="Collective timeout (s).",
)
@click.option(
    "--log-every", default=10, show_default=True, type=click.IntRange(min=0), help="Log a line every N steps."
)
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
@click.option(
    "--fault", callback=parse_fault, hidden=True, help="Testing: KIND@STEP:RANK makes a rank exit or hang."
)
# The deepspeed launcher (and torch.distributed.launch) pass each rank --local_rank=N; LOCAL_RANK says the same.
@click.option("--local_rank", "--local-rank", "local_rank", type=int, hidden=True, expose_value=False)
def main(preset, steps, per_device_batch, seq_len, lr, warmup_steps, **rest):
    """Train a HuggingFace model on the active backend (portlayer) under a data-parallel strategy, optionally
    in parity mode."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    rank = os.environ.get("RANK", "0")
    try:
        run(preset, steps, per_device_batch, seq_len, lr, warmup_steps, rest)
    except Exception as exc:
        if os.environ.get("PORTLAYER_TRACEBACK"):
            traceback.print_exc()
        message = str(exc).strip().splitlines()[0] if isinstance(exc, PortlayerError) else first_line(exc)
        print_error(f"rank {rank}: {message}")
        # A distributed job whose peer died cannot shut down cleanly: leave now, torchrun reaps the rest.
        os._exit(1)


def run(preset_name, steps, per_device_batch, seq_len, lr, warmup_steps, rest) -> None:
    from transformers.utils import logging as hf_logging

    from portlayer.train.train import Options, train

    hf_logging.set_verbosity_error()
    preset = get_preset(preset_name)
    if rest["parity"] and rest["tf32"]:
        raise PortlayerError("parity mode trains without TF32: drop --tf32 or --parity")
    if rest["resume"] and not rest["checkpoint_dir"]:
        raise PortlayerError("--resume needs --checkpoint-dir")
    if steps and rest["schedule_steps"] and steps > rest["schedule_steps"]:
        raise PortlayerError(f"--steps {steps} runs past the end of --schedule-steps {rest['schedule_steps']}")
    options = Options(
        preset=preset,
        steps=steps or preset.default_steps,
        per_device_batch=per_device_batch or preset.per_device_batch,
        seq_len=seq_len or preset.seq_len,
        lr=lr or preset.lr,
        warmup_steps=preset.warmup_steps if warmup_steps is None else warmup_steps,
        command=["-m", "portlayer.train", *sys.argv[1:]],
        **rest,
    )
    train(options)


if __name__ == "__main__":
    main(prog_name="python -m portlayer.train")
