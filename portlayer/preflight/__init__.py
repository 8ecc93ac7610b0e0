"""Before a port: which ops of a real training step would the target run natively, and which would not?

    from portlayer import preflight
    report = preflight.check(model, batch, optimizer, target="npu")
    print(report.render())          # missing ops with count, dtypes and origin; dtype risks; the verdict
    report.exit_code                # 0 all native, 1 something would fall back to the cpu or fail

`check` runs the step once on the model's own device, recorded below autograd, so the forward, the backward
and the optimizer's ops are all seen. `fake_step.run_fake_step` runs it at any size with fake tensors
instead (nothing computed or allocated), for the same recording plus the peak memory per rank.
"""

from __future__ import annotations

import importlib

# Where each public name lives: loaded on first use, so that the command's help and its option tables
# (`portlayer --help` lists `preflight`) are read without importing torch.
_HOMES = {
    "check": "portlayer.preflight.step",
    "record_step": "portlayer.preflight.step",
    "export_kernels": "portlayer.preflight.kernels",
    "resolve": "portlayer.preflight.kernels",
    "KernelSource": "portlayer.preflight.kernels",
    "Report": "portlayer.preflight.report",
    "Recording": "portlayer.preflight.recording",
    "Recorder": "portlayer.preflight.recording",
    "Origin": "portlayer.preflight.recording",
    "PortlayerError": "portlayer.errors",  # what `check` raises on a model without a loss
}
__all__ = [name for name in _HOMES if name != "PortlayerError"]


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value
