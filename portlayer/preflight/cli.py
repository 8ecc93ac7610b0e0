"""`portlayer preflight`: will a preset's training step run natively on the target, and fit its memory?

    portlayer preflight --preset mixtral-8x7b --target musa --batch-size 1 --device s4000
    portlayer preflight --preset gpt2 --target npu --memory 48GiB --report preflight.json
    portlayer preflight --export-kernels npu-kernels.txt --target npu    # on an Ascend host, once
    portlayer preflight --preset gpt2 --target npu --kernels npu-kernels.txt

The step runs with fake tensors at the published size (nothing is computed or allocated): its ops are
checked against the target's kernels, its peak memory per rank against the device's.
Exit 0: every op native and the step fits; 1: something would fall back, fail or not fit; 2: unusable input.
"""

from __future__ import annotations

import json
import sys

import click

from portlayer.backends import PROBE_ORDER
from portlayer.errors import PortlayerError
from portlayer.errors import fail as _fail
from portlayer.findings import FORMATS
from portlayer.progress import terminal_bar

# portlayer.preflight.kernels.TARGETS, read without importing torch (`portlayer --help` lists this command).
TARGETS = [backend.name for backend in PROBE_ORDER if backend.is_plugin]
STAGES = {"setup": "loading torch and the model code", "model": "building the model (fake tensors)",
          "forward": "forward", "backward": "backward", "optimizer": "optimizer step",
          "suggest": "what would make it fit"}


class Progress:
    """One line on a terminal's stderr naming the stage and the time so far (tqdm); nothing in a pipe."""

    def __init__(self, enabled: bool = True) -> None:
        self.bar = terminal_bar(enabled=enabled, total=None, leave=False, mininterval=0.5,
                                bar_format="preflight: {desc} [{elapsed}]", desc=STAGES["setup"])

    @classmethod
    def off(cls) -> Progress:
        return cls(enabled=False)

    def __call__(self, stage: str) -> None:
        if self.bar is not None:
            self.bar.set_description_str(STAGES.get(stage, stage))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


@click.command("preflight")
@click.option("--preset", help="Model preset whose training step to check (gpt2, mixtral-8x7b, gpt2-tiny, …).")
@click.option("--target", type=click.Choice(TARGETS), required=True, help="Backend to check against.")
@click.option("--kernels", "kernels", type=click.Path(dir_okay=False),
              help="Kernel list to check against (from --export-kernels, or one op name a line).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), help="Also write the report as JSON.")
@click.option("--export-kernels", "export_path", type=click.Path(dir_okay=False),
              help="Write the ops the installed vendor plugin has kernels for, and exit.")
@click.option("--batch-size", type=click.IntRange(min=1), help="Per-device batch. Default: the preset's.")
@click.option("--seq-len", type=click.IntRange(min=2), help="Default: the preset's.")
@click.option("--override", "overrides", multiple=True, metavar="FIELD=VALUE",
              help="Model config field to override, e.g. num_hidden_layers=1 (repeatable).")
@click.option("--precision", type=click.Choice(["fp32", "bf16", "fp16"]), default="fp32", show_default=True,
              help="As the trainer's --precision: autocast for bf16/fp16.")
@click.option("--device", "device_name", help="Device to fit: 910b, 910b4, s4000, a100-40gb, a100-80gb, h100-80gb.")
@click.option("--memory", "memory_size", help="Device memory to fit instead of a named device, e.g. 48GiB.")
@click.option("--ddp/--no-ddp", default=True, show_default=True, help="Per rank of a DistributedDataParallel job.")
@click.option("--output-format", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("-v", "--verbose", is_flag=True, help="List every op with its status, not only the problems.")
def preflight(preset, target, kernels, report_path, export_path, batch_size, seq_len, overrides, precision,
              device_name, memory_size, ddp, output_format, verbose):
    """Run one training step of a preset at full size with fake tensors (forward, backward, clipping,
    optimizer, DDP), check every aten op against the target's native kernels and the peak memory per rank
    against the device's."""
    if not preset and not export_path:
        _fail("pass --preset NAME (or --export-kernels FILE)")
    if device_name and memory_size:
        _fail("pass --device or --memory, not both")
    progress = Progress() if not export_path else Progress.off()
    try:
        from portlayer import preflight as engine  # torch: the first seconds the stage line covers

        if export_path:
            count = engine.export_kernels(target, export_path)
            click.echo(f"{export_path}: {count} ops with a {target} kernel")
            return
        capacity = _capacity(device_name, memory_size)
        source, unchecked = _kernel_source(engine, target, kernels)
        result = _run(preset, batch_size, seq_len, overrides, precision, ddp, capacity, progress)
    except PortlayerError as exc:
        progress.close()
        _fail(str(exc))
    progress.close()
    report = engine.Report.build(result.step.recording, source) if source is not None else None
    if output_format == "text":
        if verbose and report is not None:
            for checked in report.ops:
                click.echo(f"{checked.status:<9} {checked.use.op} x{checked.use.count}")
        click.echo(_render_text(report, unchecked, result))
    else:
        from portlayer.findings import render

        click.echo(render(output_format, _findings(report, unchecked, result), tool="portlayer preflight"), nl=False)
    if report_path:
        from portlayer.atomic import write_atomic

        try:
            write_atomic(report_path, json.dumps(_as_dict(report, unchecked, result), indent=2) + "\n")
        except OSError as exc:
            _fail(f"cannot write {report_path}: {exc.strerror or exc}")
    ops_exit = report.exit_code if report is not None else 0
    sys.exit(max(ops_exit, 0 if result.fits in (None, True) else 1))


def _capacity(device_name, memory_size):
    from portlayer.preflight import devices

    if device_name:
        device = devices.get_device(device_name)
        return device.memory, f"{device.name} ({device.describe()})"
    if memory_size:
        size = devices.parse_size(memory_size)
        return size, f"--memory {memory_size} ({devices.format_bytes(size)})"
    return None


def _kernel_source(engine, target, kernels):
    """The kernel source, or None with the reason when there is no list for the target here (the memory
    answer does not need one)."""
    from portlayer.preflight.kernels import KernelListError

    try:
        return engine.resolve(target, kernels), None
    except KernelListError as exc:
        if kernels is not None or "no kernel list" not in str(exc):
            raise
        return None, str(exc)


class _Result:
    def __init__(self, shape, config, step, capacity, suggestions):
        self.shape, self.config, self.step, self.suggestions = shape, config, step, suggestions
        self.capacity, self.device = capacity if capacity else (None, None)

    @property
    def fits(self) -> bool | None:
        return None if self.capacity is None else self.step.memory.total <= self.capacity


def _run(preset, batch_size, seq_len, overrides, precision, ddp, capacity, progress) -> _Result:
    from portlayer.preflight import plan

    shape = plan.resolved(plan.Shape(preset, batch_size, seq_len, dict(map(plan.parse_override, overrides)),
                                     precision, ddp))
    step, config = plan.fake_preset_step(shape, progress=progress)
    suggestions = []
    if capacity is not None and step.memory.total > capacity[0]:
        progress("suggest")
        suggestions = plan.suggestions(shape, config, step.memory, capacity[0],
                                       lambda other: plan.fake_preset_step(other)[0].memory)
    return _Result(shape, config, step, capacity, suggestions)


def _render_text(report, unchecked, result: _Result) -> str:
    from portlayer.preflight.devices import TIGHT_MARGIN, format_bytes

    memory = result.step.memory
    lines = [report.render()] if report is not None else [
        f"ops: {len(result.step.recording.ops)} recorded, not checked: {unchecked}"]
    lines.append(f"memory per rank ({result.shape.describe(result.config)}), peak in the {memory.phase}:")
    for name, size in memory.parts().items():
        lines.append(f"  {name:<18} {format_bytes(size):>12}")
    lines.append(f"  {'total':<18} {format_bytes(memory.total):>12}")
    if result.capacity is not None:
        spare = result.capacity - memory.total
        if spare < 0:
            lines.append(f"{result.device}: does not fit, {format_bytes(-spare)} over")
        else:
            tight = " (tight: the runtime's own memory may not leave that)" if spare < TIGHT_MARGIN else ""
            lines.append(f"{result.device}: fits, {format_bytes(spare)} to spare{tight}")
        if result.suggestions:
            lines.append("to fit:")
            lines.extend(f"  {suggestion.describe()}" for suggestion in result.suggestions)
    return "\n".join(lines)


def _findings(report, unchecked, result: _Result) -> list:
    """Each problem as a Finding: an op at its first origin, the memory verdict at the preset's config."""
    from portlayer.findings import Finding
    from portlayer.preflight.devices import format_bytes

    config_path = f"configs/{result.shape.preset.removesuffix('-tiny')}.json"
    found = []

    def at(origin):
        path, _, line = (origin.location or "").rpartition(":")
        return (path, int(line)) if path and line.isdigit() else (config_path, 1)

    if report is not None:
        for checked in report.missing:
            use = checked.use
            path, line = at(use.first)
            found.append(Finding(path, line, 1, "PF101", "error",
                                 f"{use.op} has no {report.target} kernel (x{use.count}, "
                                 f"{','.join(sorted(use.dtypes)) or '-'}): {use.first.describe()}",
                                 f"it would fall back to the cpu or fail (source: {report.source.label})",
                                 "op without a native kernel"))
        for risk in report.dtype_risks:
            path, line = at(risk.use.first)
            found.append(Finding(path, line, 1, "PF102", "warning", f"{risk.use.op} in {risk.dtype}: {risk.why}",
                                 "", "dtype the target lacks"))
    else:
        found.append(Finding(config_path, 1, 1, "PF103", "info",
                             f"{len(result.step.recording.ops)} ops recorded, not checked: {unchecked}", "",
                             "ops not checked"))
    if result.capacity is not None:
        total = result.step.memory.total
        if result.fits:
            found.append(Finding(config_path, 1, 1, "PF202", "info",
                                 f"peak {format_bytes(total)} per rank fits {result.device}", "", "memory fits"))
        else:
            found.append(Finding(config_path, 1, 1, "PF201", "error",
                                 f"peak {format_bytes(total)} per rank does not fit {result.device}: "
                                 f"{format_bytes(total - result.capacity)} over",
                                 "; ".join(s.describe() for s in result.suggestions), "memory does not fit"))
    return found


def _as_dict(report, unchecked, result: _Result) -> dict:
    answer = report.as_dict() if report is not None else {
        "ops": [{"op": use.op, "count": use.count, "dtypes": sorted(use.dtypes)}
                for use in result.step.recording.ops.values()], "unchecked": unchecked}
    answer["memory"] = result.step.memory.as_dict()
    answer["shape"] = {"preset": result.shape.preset, "batch_size": result.shape.batch_size,
                       "seq_len": result.shape.seq_len, "overrides": dict(result.shape.overrides),
                       "precision": result.shape.precision, "ddp": result.shape.ddp}
    if result.capacity is not None:
        answer["device"] = {"label": result.device, "memory": result.capacity, "fits": result.fits,
                            "suggestions": [{"option": s.option, "memory": s.memory, "fits": s.fits, "why": s.why}
                                            for s in result.suggestions]}
    return answer
