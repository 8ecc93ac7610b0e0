"""`locate`: run a model on the device and on the cpu in float64 (the oracle) and blame one module.

Each module's *own* error is measured by re-running it alone, in the device's dtypes, on the oracle's
exact inputs (and, for the backward, the oracle's exact output gradients), against the same re-run in
float64. Errors that reached the module from upstream are thus out of the measure by construction.
See docs/parity-locate.md.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from portlayer.train.locate.capture import Call, trace
from portlayer.train.locate.error import Error, compare, compare_each
from portlayer.train.locate.report import LocateReport, Row
from portlayer.train.locate.sides import Side
from portlayer.train.locate.tree import float_leaves, tree_map

ORACLE_DTYPE = torch.float64


def default_tolerance(dtype: torch.dtype) -> float:
    """sqrt(eps): a module is flagged when its own error has cost half the dtype's significant bits
    (3.5e-4 in float32, 3.1e-2 in float16, 8.8e-2 in bfloat16). Correct kernels lose a few bits
    (accumulation order, fused vs unfused ops); a wrong eps, a layer computed in a lower precision or a
    wrong kernel lose far more."""
    return torch.finfo(dtype).eps ** 0.5


def model_dtype(model: nn.Module) -> torch.dtype:
    return next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)


def prepare_copy(model: nn.Module, device: torch.device, dtype: torch.dtype) -> nn.Module:
    clone = copy.deepcopy(model).to(device=device, dtype=dtype)
    # Dropout off on both sides; HF caches off, so that a module re-run does not append to a cache.
    clone.eval()
    config = getattr(clone, "config", None)
    if config is not None and hasattr(config, "use_cache"):
        config.use_cache = False
    if dtype == torch.float64 and hasattr(clone, "set_experts_implementation"):
        # HF's grouped-matmul experts have no float64 kernel; the eager loop computes the same function.
        clone.set_experts_implementation("eager")
    return clone


def move_batch(batch: Any, device: torch.device, dtype: torch.dtype) -> Any:
    return tree_map(lambda t: t.to(device, dtype) if t.is_floating_point() else t.to(device), batch)


def _clone(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone().requires_grad_(t.requires_grad and t.is_floating_point())


def _dtype_only(t: torch.Tensor) -> torch.Tensor:
    return t.new_empty(0)


def locate(
    model: nn.Module,
    batch: Any,
    *,
    device: torch.device | None = None,
    dtype: torch.dtype | None = None,
    tolerance: float | None = None,
    loss_fn: Callable[[Any], torch.Tensor] | None = None,
) -> LocateReport:
    """Compare one forward and backward of `model` on `batch` on `device` (default: portlayer's active
    device) in `dtype` (default: the model's) with the float64 cpu oracle; name the module to blame.

    `model` itself is left untouched: both sides run on copies with identical weights.
    """
    import portlayer

    device = torch.device(device) if device is not None else portlayer.device()
    dtype = dtype or model_dtype(model)
    tolerance = default_tolerance(dtype) if tolerance is None else tolerance
    cpu = torch.device("cpu")

    on_device = prepare_copy(model, device, dtype)
    oracle = prepare_copy(model, cpu, ORACLE_DTYPE)
    # Of the device's inputs only their dtypes are needed (to cast the oracle's): keep empty stand-ins.
    dev = trace(on_device, move_batch(batch, device, dtype), _clone, loss_fn, keep_input=_dtype_only)
    ref = trace(oracle, move_batch(batch, cpu, ORACLE_DTYPE), _clone, loss_fn)
    if device.type != "cpu":
        portlayer.synchronize()

    dev_calls = {call.key: call for call in dev.calls}
    modules = dict(oracle.named_modules()), dict(on_device.named_modules())
    rows = [_row(call, dev_calls.pop(call.key, None), modules, (ref, dev), device, dtype, tolerance)
            for call in ref.calls]  # fmt: skip
    for call in dev_calls.values():  # ran on the device only (e.g. an expert a router chose there only)
        rows.append(
            Row(call.key, call.module_type, 0, None, Error.unusable(), None, None, note="device only")
        )

    return LocateReport(
        sides=[("oracle", Side.active(cpu, ORACLE_DTYPE)), ("device", Side.active(device, dtype))],
        losses=[float(ref.loss), float(dev.loss)],
        tolerance=tolerance,
        rows=rows,
        basis_header="own_rel",
    )


def _row(call: Call, peer: Call | None, modules: tuple[dict, dict], traces, device, dtype, tolerance) -> Row:
    """The report's row for one module call of the oracle and its `peer` on the device (None: not run there).
    `modules` and `traces` are (oracle's, device's)."""
    oracle_module, device_module = (named[_name(call)] for named in modules)
    own = _own_error(call, peer, oracle_module, device_module, device, dtype)
    return Row(
        key=call.key,
        module_type=call.module_type,
        depth=call.depth,
        parent=call.parent,
        output=compare_each(call.outputs, peer.outputs) if peer else Error.unusable(),
        grad=_grad_error(call, peer, oracle_module, traces[0].param_grads, traces[1].param_grads),
        basis=own,
        flagged=own is not None and own > tolerance,
        reason=f"own error {own:.2e} > tolerance {tolerance:.2e} (re-run alone on the oracle's inputs)"
        if own is not None
        else "",
        note="" if peer else "not run on the device",
    )


def _name(call: Call) -> str:
    return "" if call.module_name == "<model>" else call.module_name


def _grad_error(call: Call, peer: Call | None, module: nn.Module, ref_grads: dict, dev_grads: dict):
    """Error of the gradients of the call's outputs and of the module's own (non-nested) parameters,
    pooled like the re-run's."""
    prefix = f"{_name(call)}." if _name(call) else ""
    names = [prefix + name for name, _ in module.named_parameters(recurse=False)]
    pairs = [(ref_grads[n], dev_grads.get(n)) for n in names if n in ref_grads]
    if peer is not None:
        pairs += [(r, g) for r, g in zip(call.grads, peer.grads) if r is not None]
    if any(g is None for _, g in pairs):
        return Error.unusable()
    return compare([r for r, _ in pairs], [g for _, g in pairs])


def _own_error(
    call: Call,
    peer: Call | None,
    oracle_module: nn.Module,
    device_module: nn.Module,
    device: torch.device,
    dtype: torch.dtype,
) -> float | None:
    """Relative error of the module re-run alone on the oracle's inputs, forward and backward."""
    inputs = (call.args, call.kwargs)
    # The device side gets each input in the dtype it had on the device (mixed precision stays mixed).
    dtypes = [t.dtype for t in float_leaves((peer.args, peer.kwargs))] if peer else []
    if len(dtypes) != len(float_leaves(inputs)):
        dtypes = [dtype] * len(float_leaves(inputs))
    out_dtypes = peer.output_dtypes if peer and len(peer.output_dtypes) == len(call.grads) else None

    ref_out, ref_grads = _rerun(oracle_module, inputs, call.grads)
    casts = iter(dtypes)
    dev_inputs = tree_map(lambda t: _to(t, device, next(casts) if t.is_floating_point() else None), inputs)
    dev_out_grads = [
        None if g is None else _to(g, device, out_dtypes[i] if out_dtypes else dtype)
        for i, g in enumerate(call.grads)
    ]
    dev_out, dev_grads = _rerun(device_module, dev_inputs, dev_out_grads)

    # Outputs one by one; gradients pooled: a gradient that is zero up to rounding (a key projection's
    # bias under softmax) is judged on the scale of the others, where its rounding belongs.
    errors = [compare_each(ref_out, dev_out)]
    present = [(r, g) for r, g in zip(ref_grads, dev_grads) if r is not None or g is not None]
    if len(ref_grads) != len(dev_grads) or any(r is None or g is None for r, g in present):
        errors.append(Error.unusable())
    else:
        errors.append(compare([r for r, _ in present], [g for _, g in present]))
    return max((e.rel for e in errors if e is not None), default=None)


def _to(t: torch.Tensor, device: torch.device, dtype: torch.dtype | None) -> torch.Tensor:
    """`t` on `device` in `dtype`, saturating: float64's lowest (an attention mask's "minus infinity")
    becomes float32's lowest, as the device run had it, not -inf."""
    wants_grad, t = t.requires_grad, t.detach()
    if dtype is not None and t.is_floating_point():
        low, high = torch.finfo(dtype).min, torch.finfo(dtype).max
        t = torch.where(torch.isfinite(t), t.clamp(low, high), t).to(dtype)
    return t.to(device).requires_grad_(wants_grad)


def _rerun(module: nn.Module, inputs: tuple, out_grads: list) -> tuple[list, list]:
    """Outputs of `module` on `inputs`, and the gradients of its inputs and parameters given `out_grads`."""
    wrt: list = []

    def prepare(t: torch.Tensor) -> torch.Tensor:
        leaf = t.detach().clone().requires_grad_(t.requires_grad)
        if not leaf.requires_grad:
            return leaf
        wrt.append(leaf)
        return leaf.clone()  # not a leaf itself, so that a module may still change it in place

    with torch.enable_grad():
        args, kwargs = tree_map(prepare, inputs)
        outputs = float_leaves(module(*args, **kwargs))
    wanted = [(o, g) for o, g in zip(outputs, out_grads) if g is not None and o.requires_grad]
    wrt += [p for p in module.parameters() if p.requires_grad]
    grads: list = []
    if wanted and wrt:
        grads = list(
            torch.autograd.grad([o for o, _ in wanted], wrt, [g for _, g in wanted], allow_unused=True)
        )
    return [o.detach() for o in outputs], grads
