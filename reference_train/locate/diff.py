"""`diff`: align two dumps (say an A100's and an NPU's) module by module and blame one module.

With statistics only, a module's own error is judged from its inputs: it is flagged when its outputs
diverge beyond tolerance *and* by more than AMPLIFICATION times what its inputs already did, so that
the divergence a faulty module passes downstream is not blamed on the modules that merely carry it.
Likewise for the backward: a module whose parameter gradients diverge far more than the gradients
flowing into it. See docs/parity-locate.md.
"""

from __future__ import annotations

import math

import torch

from portlayer.train.locate.dump import Dump, DumpedCall, DumpError
from portlayer.train.locate.error import Error, compare, compare_each, compare_flat
from portlayer.train.locate.oracle import default_tolerance as dtype_tolerance
from portlayer.train.locate.report import LocateReport, Row
from portlayer.train.locate.stats import Stats

# How much more than its inputs a module's outputs must diverge before the divergence is its own. Correct
# layers pass a relative error through roughly unchanged (layer norms and softmaxes can double it).
AMPLIFICATION = 10.0


def default_tolerance(a: Dump, b: Dump) -> float:
    """`locate`'s tolerance for the coarser of the two sides' dtypes."""
    return max(dtype_tolerance(getattr(torch, side.dtype)) for side in (a.side, b.side))


def check_comparable(a: Dump, b: Dump) -> None:
    """Raise DumpError unless the two dumps are of the same model on the same batch."""
    if a.meta.get("model") != b.meta.get("model"):
        raise DumpError(f"dumps of different models: {a.meta.get('model')!r} and {b.meta.get('model')!r}")
    if a.meta.get("batch") != b.meta.get("batch"):
        raise DumpError("dumps of different batches (their batch checksums or shapes differ)")
    if not {c.key for c in a.calls} & {c.key for c in b.calls}:
        raise DumpError("dumps share no module: not the same model")


def diff(a: Dump, b: Dump, *, tolerance: float | None = None) -> LocateReport:
    """Compare dump `b` against the reference dump `a`."""
    check_comparable(a, b)
    tolerance = default_tolerance(a, b) if tolerance is None else tolerance
    b_calls = {call.key: call for call in b.calls}
    rows = [_row(a, b, call, b_calls.pop(call.key, None), tolerance) for call in a.calls]
    rows += [
        Row(call.key, call.module_type, 0, None, Error.unusable(), None, None, note="only in B")
        for call in b_calls.values()
    ]
    return LocateReport(
        sides=[("A", a.side), ("B", b.side)],
        losses=[float(a.meta["loss"]), float(b.meta["loss"])],
        tolerance=tolerance,
        rows=rows,
        basis_header="in_rel",
        unattributed=_backward_only(rows, tolerance),
    )


def _backward_only(rows: list[Row], tolerance: float) -> str | None:
    """When the forward agrees but gradients do not, a backward kernel is wrong. Statistics of a module's
    outputs and parameters cannot say which module's input gradient went wrong: say where it shows."""
    if any(row.flagged for row in rows):
        return None
    # Calls whose tensors differ in shape (an MoE's experts looped on one side, grouped on the other) are
    # noted on their rows, not counted here.
    grads = [row for row in rows if row.grad is not None and tolerance < row.grad.rel < math.inf]
    if not grads:
        return None
    return (
        f"gradients diverge (by {max(row.grad.rel for row in grads):.2e} at worst) while every module's "
        f"forward agrees: a backward is wrong; run `portlayer parity locate` to name the module"
    )


def _row(a: Dump, b: Dump, call: DumpedCall, peer: DumpedCall | None, tolerance: float) -> Row:
    if peer is None:
        return Row(
            call.key,
            call.module_type,
            call.depth,
            call.parent,
            Error.unusable(),
            None,
            None,
            note="only in A",
        )
    # Activations one by one (an attention mask's huge values must not set the scale of the hidden
    # states beside it); gradients pooled.
    one = lambda r, g: _compare(a, b, [r], [g])  # noqa: E731
    inputs = compare_each(call.inputs, peer.inputs, one)
    outputs = compare_each(call.outputs, peer.outputs, one)
    out_grads = _compare(a, b, *_present(call.grads, peer.grads))
    name = call.key.split("#")[0]
    prefix = "" if name == "<model>" else name + "."
    own_params = [n for n in a.params if n.startswith(prefix) and "." not in n[len(prefix) :]]
    param_grads = _compare(a, b, [a.params[n] for n in own_params], [b.params.get(n) for n in own_params])

    in_rel = inputs.rel if inputs else 0.0
    shapes = [[s.shape for s in c.inputs + c.outputs] for c in (call, peer)]
    row = Row(
        call.key,
        call.module_type,
        call.depth,
        call.parent,
        output=outputs,
        grad=param_grads.worst(out_grads) if param_grads else out_grads,
        basis=in_rel,
        note="" if shapes[0] == shapes[1] else "shapes differ",
    )
    if outputs and _jumps(outputs.rel, in_rel, tolerance):
        row.flagged = True
        row.reason = (
            f"outputs diverge by {outputs.rel:.2e} (tolerance {tolerance:.2e}), its inputs by {in_rel:.2e}"
        )
    elif param_grads and _jumps(param_grads.rel, max(in_rel, out_grads.rel if out_grads else 0.0), tolerance):
        # A weight gradient is computed from the inputs and the output's gradient: both must be clean.
        row.flagged = True
        row.reason = (
            f"parameter gradients diverge by {param_grads.rel:.2e} (tolerance {tolerance:.2e}), "
            f"its inputs by {in_rel:.2e}, the gradients of its outputs by "
            f"{out_grads.rel if out_grads else 0.0:.2e}"
        )
    return row


def _jumps(error: float, upstream: float, tolerance: float) -> bool:
    return error > tolerance and error > AMPLIFICATION * upstream


def _present(a: list, b: list) -> tuple[list, list]:
    """The pairs of gradients that both sides have (an output that got no gradient has None)."""
    if len(a) != len(b):
        return a, b
    pairs = [(x, y) for x, y in zip(a, b) if x is not None or y is not None]
    return [x for x, _ in pairs], [y for _, y in pairs]


def _compare(a: Dump, b: Dump, ref: list, got: list) -> Error | None:
    """Error of B's tensors against A's, pooled over the list like `locate` pools (so a gradient that is
    zero up to rounding is judged on the scale of its siblings); exact when both dumps hold full tensors."""
    if not ref and not got:
        return None
    if len(ref) != len(got) or any(r is None or g is None or r.shape != g.shape for r, g in zip(ref, got)):
        return Error.unusable()
    full_r = [a.full_tensor(r) for r in ref]
    full_g = [b.full_tensor(g) for g in got]
    if all(t is not None for t in full_r + full_g):
        return compare(full_r, full_g)
    sampled = compare_flat(_samples(ref), _samples(got))
    if sampled.max_abs == math.inf:
        return sampled
    # The scale is the whole tensors' (min and max are exact); the norms see every element, the sample
    # only a few, so a fault confined to a few elements can still show in them.
    scale = max(max(abs(r.min), abs(r.max)) for r in ref)
    norm = math.sqrt(sum(r.norm**2 for r in ref))
    shifts = [sampled.max_abs / scale if scale else _zero_or_inf(sampled.max_abs)]
    shifts.append(max(abs(g.norm - r.norm) for r, g in zip(ref, got)) / norm if norm else 0.0)
    return Error(sampled.max_abs, max(shifts), sampled.cos)


def _samples(stats: list[Stats]) -> torch.Tensor:
    return torch.tensor([v for s in stats for v in s.sample], dtype=torch.float64)


def _zero_or_inf(value: float) -> float:
    return 0.0 if value == 0.0 else math.inf
