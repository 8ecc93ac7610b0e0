"""`portlayer preflight`: which ops of a preset's training step the target would not run natively.

    portlayer preflight --preset gpt2 --target npu --report preflight.json
    portlayer preflight --export-kernels npu-kernels.txt --target npu    # on an Ascend host, once
    portlayer preflight --preset gpt2 --target npu --kernels npu-kernels.txt

Exit 0: every op native; 1: something would fall back to the cpu or fail; 2: unusable input.
"""

from __future__ import annotations

import json
import sys

import click

from portlayer.backends import PROBE_ORDER
from portlayer.errors import PortlayerError
from portlayer.errors import fail as _fail

# Which ops a step dispatches does not depend on the sequence length: a short one keeps full-size models fast.
DEFAULT_SEQ_LEN = 128
# portlayer.preflight.kernels.TARGETS, read without importing torch (`portlayer --help` lists this command).
TARGETS = [backend.name for backend in PROBE_ORDER if backend.is_plugin]


@click.command("preflight")
@click.option("--preset", help="Model preset whose training step to record (gpt2, gpt2-tiny, …).")
@click.option("--target", type=click.Choice(TARGETS), required=True, help="Backend to check against.")
@click.option("--kernels", "kernels", type=click.Path(dir_okay=False),
              help="Kernel list to check against (from --export-kernels, or one op name a line).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), help="Also write the report as JSON.")
@click.option("--export-kernels", "export_path", type=click.Path(dir_okay=False),
              help="Write the ops the installed vendor plugin has kernels for, and exit.")
@click.option("--batch-size", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--seq-len", type=click.IntRange(min=2), help=f"Default: the preset's, at most {DEFAULT_SEQ_LEN}.")
@click.option("-v", "--verbose", is_flag=True, help="List every op with its status, not only the problems.")
def preflight(preset, target, kernels, report_path, export_path, batch_size, seq_len, verbose):
    """Record one training step of a preset (forward, backward, clipping, optimizer) on the cpu and check
    every aten op against the target's native kernels."""
    from portlayer import preflight as engine
    from portlayer.atomic import write_atomic

    try:
        if export_path:
            count = engine.export_kernels(target, export_path)
            click.echo(f"{export_path}: {count} ops with a {target} kernel")
            return
        if not preset:
            _fail("pass --preset NAME (or --export-kernels FILE)")
        source = engine.resolve(target, kernels)
        model, batch, optimizer, max_grad_norm = _preset_step(preset, batch_size, seq_len)
        report = engine.check(model, batch, optimizer, target, kernels=source, clip_grad_norm=max_grad_norm)
    except PortlayerError as exc:
        _fail(str(exc))
    if verbose:
        for checked in report.ops:
            click.echo(f"{checked.status:<9} {checked.use.op} x{checked.use.count}")
    click.echo(report.render())
    if report_path:
        try:
            write_atomic(report_path, json.dumps(report.as_dict(), indent=2) + "\n")
        except OSError as exc:
            _fail(f"cannot write {report_path}: {exc.strerror or exc}")
    sys.exit(report.exit_code)


def _preset_step(name: str, batch_size: int, seq_len: int | None):
    """The preset's model, a real batch, the trainer's optimizer and its gradient-clipping norm."""
    import torch
    from portlayer.train import presets

    preset = presets.get_preset(name)
    # Not parity mode: the step as it normally trains, with the fused attention and dropout it would use.
    model = presets.build_model(preset, parity=False)
    seq_len = seq_len or min(preset.seq_len, DEFAULT_SEQ_LEN)
    batch = presets.example_batch(preset, batch_size=batch_size, seq_len=seq_len)
    optimizer = torch.optim.AdamW(model.parameters(), lr=preset.lr, weight_decay=preset.weight_decay)
    return model, batch, optimizer, preset.max_grad_norm
