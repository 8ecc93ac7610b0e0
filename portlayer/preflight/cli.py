"""`portlayer preflight`: will a model's training step run natively on the target, and fit its memory?

    portlayer preflight --config qwen1.5-7b/config.json --strategy zero3 --nproc 4 --lora-r 8 --precision bf16 \
        --device 910b
    portlayer preflight --preset mixtral-8x7b --target musa --batch-size 1 --device s4000
    portlayer preflight --preset gpt2 --target npu --memory 48GiB --report preflight.json
    portlayer preflight --export-kernels npu-kernels.txt --target npu    # on an Ascend host, once
    portlayer preflight --preset gpt2 --target npu --kernels npu-kernels.txt
    portlayer preflight --preset gpt2 --parity --grad-accum 2 --device h200   # = parity run --preset gpt2 --grad-accum 2

The step runs with fake tensors (nothing is computed or allocated): its ops are checked against the target's
kernels, its peak memory per rank under the strategy against the device's. The step is the trainer's for the
same options (`portlayer parity run`, `python -m portlayer.train`), with the device's kernels: cuda's for a
cuda device or none named.
Exit 0: every op native and the step fits; 1: something would fall back, fail or not fit; 2: unusable input.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from functools import cached_property

import click

from portlayer.errors import PortlayerError
from portlayer.errors import fail as _fail
from portlayer.findings import FORMATS
from portlayer.precision import FP32, PRECISIONS
from portlayer.preflight.plugin_backends import PLUGIN_BACKENDS
from portlayer.progress import terminal_bar
from portlayer.strategies import DEFAULT as DEFAULT_STRATEGY
from portlayer.strategies import STRATEGIES
from portlayer.strategies.layout import ONE_F_ONE_B, PIPELINE_SCHEDULES, Layout

STAGES = {"setup": "loading torch and the model code", "model": "building the model (fake tensors)",
          "forward": "forward", "backward": "backward", "optimizer": "optimizer step",
          "suggest": "what would make it fit"}


class StageLine:
    """One line on a terminal's stderr naming the stage and the time so far (tqdm); nothing in a pipe."""

    def __init__(self, enabled: bool = True) -> None:
        self.bar = terminal_bar(enabled=enabled, total=None, leave=False, mininterval=0.5,
                                bar_format="preflight: {desc} [{elapsed}]", desc=STAGES["setup"])

    @classmethod
    def off(cls) -> StageLine:
        return cls(enabled=False)

    def __call__(self, stage: str) -> None:
        if self.bar is not None:
            self.bar.set_description_str(STAGES.get(stage, stage))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


@click.command("preflight")
@click.option("--preset", help="The trainer's model preset (gpt2, bert-base-uncased, mixtral-8x7b: 1 layer as the "
                               "trainer has it, …-tiny), or mixtral-8x7b-published: all 32 published layers.")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="A HuggingFace config.json instead of a preset (any architecture; read offline).")
@click.option("--target", type=click.Choice(PLUGIN_BACKENDS),
              help="Backend to check the ops against. Default: the --device's, when it has a plugin.")
@click.option("--kernels", "kernels", type=click.Path(dir_okay=False),
              help="Kernel list to check against (from --export-kernels, or one op name a line).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), help="Also write the report as JSON.")
@click.option("--export-kernels", "export_path", type=click.Path(dir_okay=False),
              help="Write the ops the installed vendor plugin has kernels for, and exit.")
@click.option("--batch-size", type=click.IntRange(min=1), help="Per-device batch. Default: the preset's, 1 for --config.")
@click.option("--seq-len", type=click.IntRange(min=2), help="Default: the preset's, 2048 for --config.")
@click.option("--override", "overrides", multiple=True, metavar="FIELD=VALUE",
              help="Model config field to override, e.g. num_hidden_layers=1 (repeatable).")
@click.option("--precision", type=click.Choice(list(PRECISIONS)), default=FP32.name, show_default=True,
              help="The trainer's: bf16/fp16 run the forward under autocast over fp32 weights.")
@click.option("--weights", type=click.Choice(list(PRECISIONS)), default=FP32.name, show_default=True,
              help="16-bit weights and gradients, fp32 master weights in the optimizer, the forward in that type "
                   "(not the trainer's: a model loaded in bf16).")
@click.option("--parity", is_flag=True, help="The trainer's parity mode: dropout off, eager attention.")
@click.option("--grad-accum", type=click.IntRange(min=1), default=1, show_default=True,
              help="Micro-batches per optimizer step (the trainer's --grad-accum; ddp).")
@click.option("--strategy", type=click.Choice(list(STRATEGIES)), default=DEFAULT_STRATEGY, show_default=True,
              help="How the job shards its state (portlayer.strategies, as the trainer runs it).")
@click.option("--nproc", type=click.IntRange(min=1), default=1, show_default=True,
              help="The world size whose per-rank shares are predicted (nothing is launched).")
@click.option("--tp", "--tensor-model-parallel-size", "tensor", type=click.IntRange(min=1), default=1,
              show_default=True, help="Ranks that split each layer's matmuls (the trainer's tensor parallel).")
@click.option("--sp", "--sequence-parallel", "sequence", is_flag=True,
              help="Outside the split matmuls each --tp rank keeps 1/tp of the sequence (Megatron's).")
@click.option("--pp", "--pipeline-model-parallel-size", "pipeline", type=click.IntRange(min=1), default=1,
              show_default=True, help="Pipeline stages of consecutive blocks; micro-batches = --grad-accum.")
@click.option("--pp-schedule", "schedule", type=click.Choice(PIPELINE_SCHEDULES), default=ONE_F_ONE_B,
              show_default=True, help="The pipeline's order of micro-batch forwards and backwards.")
@click.option("--lora-r", type=click.IntRange(min=1),
              help="LoRA of this rank on the attention projections, the base model frozen (as peft).")
@click.option("--gradient-checkpointing", is_flag=True, help="Recompute each layer's activations in the backward.")
@click.option("--device", "device_name",
              help="Device to fit, whose kernels and allocator the step runs with: 910b, 910b4, s4000, a100-40gb, "
                   "a100-80gb, h100-80gb, h200.")
@click.option("--memory", "memory_size", help="Device memory to fit instead of a named device, e.g. 48GiB.")
@click.option("--output-format", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("-v", "--verbose", is_flag=True, help="List every op with its status, not only the problems.")
def preflight(preset, config_path, target, kernels, report_path, export_path, device_name, memory_size, output_format,
              verbose, **step):
    """Run one training step of a model at full size with fake tensors (forward, backward, clipping,
    optimizer), as the trainer runs it on the device, check every aten op against the target's native
    kernels, and predict the peak memory per rank under a strategy and world size: the tensors, the caching
    allocator's peaks and what the device tool would show, against the device's memory."""
    if export_path:
        if not target:
            _fail("--export-kernels needs --target")
        _export(target, export_path)
        return
    if bool(preset) == bool(config_path):
        _fail("pass --preset NAME or --config PATH (or --export-kernels FILE)")
    if device_name and memory_size:
        _fail("pass --device or --memory, not both")
    progress = StageLine()
    try:
        capacity = _capacity(device_name, memory_size)
        shape = _shape(preset, config_path, step)
        source, unchecked = _kernel_source(target or _device_backend(device_name), kernels)
        result = _run(shape, capacity, _on(device_name, target), progress)
    except PortlayerError as exc:
        _fail(str(exc))
    finally:
        progress.close()
    from portlayer import preflight as engine

    report = engine.Report.build(result.prediction.recording, source) if source is not None else None
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


def _shape(preset, config_path, step: dict):
    """The step the options describe, in the trainer's terms."""
    from portlayer.preflight.model_source import Training
    from portlayer.preflight.plan import Shape, parse_override

    if step["grad_accum"] > 1 and step["strategy"] != DEFAULT_STRATEGY:
        raise PortlayerError(f"--grad-accum is predicted under {DEFAULT_STRATEGY} only (the sharded engines "
                             f"accumulate in buffers of their own)")
    layout = _layout(step)
    training = Training(step["precision"], step["strategy"], step["nproc"], step["lora_r"],
                        step["gradient_checkpointing"], step["weights"], step["parity"], step["grad_accum"], layout)
    overrides = dict(map(parse_override, step["overrides"]))
    return Shape(preset, step["batch_size"], step["seq_len"], overrides, training, config_path)


def _layout(step: dict) -> Layout:
    """The --tp/--sp/--pp layout, refused as the trainer refuses it (before any rank starts), and where preflight
    has no answer for it."""
    layout = Layout(step.pop("tensor"), step.pop("pipeline"), step.pop("sequence"), step.pop("schedule"))
    layout.check_training(step["strategy"], grad_accum=step["grad_accum"])
    layout.data_parallel(step["nproc"])
    if layout.splits and step["lora_r"]:
        raise PortlayerError(f"{layout.describe()} with --lora-r: the trainer splits whole models, not adapters")
    return layout


def _on(device_name, target):
    """Where the step runs: the --device's backend and compute capability, else --target's backend, else cuda."""
    from portlayer.preflight import devices
    from portlayer.preflight.per_rank import On
    from portlayer.preflight.targets import get_target

    if device_name:
        device = devices.get_device(device_name)
        if target and target != device.backend:
            # The step runs on one device's kernels; checking another backend's ops against them would report
            # kernels the target never runs (cuda's efficient attention "missing on npu").
            raise PortlayerError(f"--device {device_name} runs {device.backend}, not --target {target}: "
                                 f"name a {target} device, or --memory SIZE")
        return On(get_target(device.backend), device.capability)
    return On(get_target(target or "cuda"))


def _export(target, export_path):
    from portlayer import preflight as engine

    try:
        count = engine.export_kernels(target, export_path)
    except PortlayerError as exc:
        _fail(str(exc))
    click.echo(f"{export_path}: {count} ops with a {target} kernel")


def _device_backend(device_name):
    """The backend a named device runs, when preflight has kernels for it (910b: npu); else None."""
    from portlayer.preflight import devices

    backend = devices.get_device(device_name).backend if device_name else None
    return backend if backend in PLUGIN_BACKENDS else None


def _capacity(device_name, memory_size):
    from portlayer.preflight import devices

    if device_name:
        device = devices.get_device(device_name)
        return device.memory, f"{device.name} ({device.describe()})"
    if memory_size:
        size = devices.parse_size(memory_size)
        return size, f"--memory {memory_size} ({devices.format_bytes(size)})"
    return None


def _kernel_source(target, kernels):
    """The kernel source, or None with the reason when there is no list for the target here (the memory
    answer does not need one)."""
    from portlayer.preflight.kernels import KernelListError, resolve

    if target is None:
        if kernels is not None:
            raise PortlayerError("--kernels needs --target (or a --device whose backend has a plugin)")
        return None, "no --target (nor a --device whose backend it names)"
    try:
        return resolve(target, kernels), None
    except KernelListError as exc:
        if kernels is not None or "no kernel list" not in str(exc):
            raise
        return None, str(exc)


@dataclass(frozen=True)
class _Result:
    shape: object  # plan.Shape
    model: object  # model_source.ModelSource
    on: object  # per_rank.On
    prediction: object  # per_rank.Prediction
    capacity: int | None
    device: str | None  # the capacity's label
    suggestions: list

    @property
    def memory(self):
        return self.prediction.memory

    @cached_property
    def traffic(self) -> list:
        from portlayer.preflight.communication import step_traffic

        return step_traffic(self.prediction, self.shape.training)

    @property
    def fits(self) -> bool | None:
        return None if self.capacity is None else self.prediction.in_use <= self.capacity


def _run(shape, capacity, on, progress) -> _Result:
    from portlayer.preflight import plan

    model = plan.source(shape)
    layout = shape.training.layout
    layout.check_model(model.config)  # the heads over --tp, the layers over --pp
    layout.check_sequence(next(iter(model.batch.values())).shape[1])
    prediction = plan.predict(shape, progress, on)
    suggestions = []
    size, label = capacity if capacity else (None, None)
    if size is not None and prediction.in_use > size:
        progress("suggest")
        suggestions = plan.suggestions(shape, model.layers, len(next(iter(model.batch.values()))),
                                       prediction.in_use, size, lambda other: plan.predict(other, on=on).in_use)
    return _Result(shape, model, on, prediction, size, label, suggestions)


def _render_text(report, unchecked, result: _Result) -> str:
    from portlayer.preflight.devices import TIGHT_MARGIN, format_bytes

    memory = result.memory
    lines = [report.render()] if report is not None else [
        f"ops: {len(result.prediction.recording.ops)} recorded, not checked: {unchecked}"]
    lines.append(f"memory per rank ({result.shape.describe(result.model)}), peak in the {memory.phase}:")
    for name, size in memory.parts().items():
        lines.append(f"  {name:<18} {format_bytes(size):>12}")
    lines.append(f"  {'total':<18} {format_bytes(memory.total):>12}")
    lines.extend(_device_lines(result))
    lines.extend(_communication_lines(result))
    if result.capacity is not None:
        spare = result.capacity - result.prediction.in_use
        if spare < 0:
            lines.append(f"{result.device}: does not fit, {format_bytes(-spare)} over")
        else:
            tight = " (tight: the runtime's own memory may not leave that)" if spare < TIGHT_MARGIN else ""
            lines.append(f"{result.device}: fits, {format_bytes(spare)} to spare{tight}")
        if result.suggestions:
            lines.append("to fit:")
            lines.extend(f"  {suggestion.describe()}" for suggestion in result.suggestions)
    return "\n".join(lines)


def _communication_lines(result: _Result) -> list[str]:
    """The collectives the layout runs, per rank and step, and the library that runs them on the target."""
    from portlayer.backends import DIST_BACKEND_BY_DEVICE
    from portlayer.preflight.communication import itemised

    traffic, training = result.traffic, result.shape.training
    if not itemised(training):
        return [f"communication per rank and step: not itemised under --strategy {training.strategy} (ddp, --tp and "
                "--pp are)"] if training.nproc > 1 else []
    if not traffic:
        return []
    library = DIST_BACKEND_BY_DEVICE.get(result.on.target.name, "the collective library").upper()
    return [f"communication per rank and step ({library} collectives):",
            *(f"  {line.describe()}" for line in traffic)]


def _kernels(on) -> str:
    """Whose kernels and allocator the step ran with, e.g. "cuda, sm 9.0"."""
    capability = f", sm {on.capability[0]}.{on.capability[1]}" if on.capability else ""
    return f"{on.target.name}{capability}"


def _device_lines(result: _Result) -> list[str]:
    """The caching allocator's peaks and the device tool's figure, with what the latter leaves out."""
    from portlayer.preflight.devices import format_bytes

    device = result.prediction.device
    outside = [f"{name} {format_bytes(cost.bytes)}" for name, cost in device.outside.items() if cost.bytes is not None]
    lines = [f"on {_kernels(result.on)} (its kernels and caching allocator):",
             f"  {'allocated (peak)':<18} {format_bytes(device.allocated):>12}",
             f"  {'reserved (peak)':<18} {format_bytes(device.reserved):>12}",
             f"  {device.tool:<18} {format_bytes(device.shown):>12}  {' + '.join(['reserved', *outside])}"]
    for name in device.uncounted:
        lines.append(f"    not counted: {name}: {device.outside[name].source}")
    return lines


def _finding(code: str, path: str, line: int, message: str, hint: str = ""):
    from portlayer.findings import Finding
    from portlayer.preflight.codes import CODES

    row = CODES[code]
    return Finding(path=path, line=line, col=1, code=code, severity=row.severity, message=message, hint=hint,
                   title=row.title)


def _findings(report, unchecked, result: _Result) -> list:
    """Each problem as a Finding: an op at its first origin; the memory per rank and its verdict at the
    model's config."""
    from portlayer.preflight.devices import format_bytes

    shape = result.shape
    config_path = shape.config_path or f"configs/{shape.preset.removesuffix('-tiny')}.json"
    found = []

    def at(origin):
        path, _, line = (origin.location or "").rpartition(":")
        return (path, int(line)) if path and line.isdigit() else (config_path, 1)

    if report is not None:
        for checked in report.missing:
            use = checked.use
            found.append(_finding("PF101", *at(use.first),
                                  f"{use.op} has no {report.target} kernel (x{use.count}, "
                                  f"{','.join(sorted(use.dtypes)) or '-'}): {use.first.describe()}",
                                  f"it would fall back to the cpu or fail (source: {report.source.label})"))
        for risk in report.dtype_risks:
            found.append(_finding("PF102", *at(risk.use.first), f"{risk.use.op} in {risk.dtype}: {risk.why}"))
    else:
        found.append(_finding("PF103", config_path, 1,
                              f"{len(result.prediction.recording.ops)} ops recorded, not checked: {unchecked}"))
    memory, device = result.memory, result.prediction.device
    parts = ", ".join(f"{name} {format_bytes(size)}" for name, size in memory.parts().items())
    found.append(_finding("PF203", config_path, 1,
                          f"peak {format_bytes(memory.total)} per rank in the {memory.phase} "
                          f"({shape.describe(result.model)}): {parts}; on {_kernels(result.on)}: allocated "
                          f"{format_bytes(device.allocated)}, reserved {format_bytes(device.reserved)}, "
                          f"{device.tool} {format_bytes(device.shown)}"))
    found.extend(_finding("PF301", config_path, 1, traffic.describe()) for traffic in result.traffic)
    if result.capacity is not None:
        total = result.prediction.in_use
        if result.fits:
            found.append(_finding("PF202", config_path, 1, f"peak {format_bytes(total)} per rank fits {result.device}"))
        else:
            found.append(_finding("PF201", config_path, 1,
                                  f"peak {format_bytes(total)} per rank does not fit {result.device}: "
                                  f"{format_bytes(total - result.capacity)} over",
                                  "; ".join(s.describe() for s in result.suggestions)))
    return found


def _as_dict(report, unchecked, result: _Result) -> dict:
    answer = report.as_dict() if report is not None else {
        "ops": [{"op": use.op, "count": use.count, "dtypes": sorted(use.dtypes)}
                for use in result.prediction.recording.ops.values()], "unchecked": unchecked}
    shape, model, count = result.shape, result.model, result.prediction.count
    batch = next(iter(model.batch.values())).shape
    answer["memory"] = result.memory.as_dict()
    answer["communication"] = [traffic.as_dict() for traffic in result.traffic]
    answer["device_memory"] = {**result.prediction.device.as_dict(), "capability": result.on.capability}
    answer["parameters"] = {"total": count.total, "trainable": count.trainable,
                            "largest_layer": count.largest_layer, "layers_stepped": result.prediction.layers_run}
    answer["shape"] = {"model": shape.model, "batch_size": batch[0], "seq_len": batch[1],
                       "overrides": dict(shape.overrides), "layers": model.layers, **asdict(shape.training)}
    if result.capacity is not None:
        answer["device"] = {"label": result.device, "memory": result.capacity, "fits": result.fits,
                            "suggestions": [{"option": s.option, "memory": s.memory, "fits": s.fits, "why": s.why}
                                            for s in result.suggestions]}
    return answer
