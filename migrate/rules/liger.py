"""liger_kernel (Triton kernels) rewritten into portable torch.

Source: linkedin/Liger-Kernel@ead96b61 (src/liger_kernel/transformers/cross_entropy.py, rms_norm.py,
fused_linear_cross_entropy.py, monkey_patch.py; the loss's math in src/liger_kernel/ops/cross_entropy.py).

- `LigerCrossEntropyLoss` -> `torch.nn.CrossEntropyLoss` (`weight`, `ignore_index`, `reduction`,
  `label_smoothing` mean the same). The z-loss (`lse_square_scale`), `softcap` and the extra outputs
  (`return_*`) have no torch counterpart, and a class `weight` together with label smoothing is not
  claimed exact: reported.
- `LigerFusedLinearCrossEntropyLoss` -> a function with its call signature (`lin_weight, _input, target,
  bias=None`) that computes the logits (`F.linear`) and `F.cross_entropy`: the same numbers, but the
  logits are materialised (liger's point is not to): a note (PL221).
- `LigerRMSNorm` -> `torch.nn.RMSNorm` with liger's eps (1e-6) made explicit; `offset` (Gemma's 1 + w)
  and `init_fn="zeros"` are reported.
- `apply_liger_kernel_to_<model>(...)` as a statement patches the model's layers with Triton kernels: the
  call is dropped (PL127) with an info note (PL217), and the model keeps its stock torch layers.
"""

from __future__ import annotations

import libcst as cst

from portlayer.migrate.engine.dropped import DROPPED
from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.library_calls import (
    LEFT_TO_PROGRAM,
    Arguments,
    LibraryCalls,
    Portable,
    Refused,
    Row,
    differs,
    head_name,
)

_CROSS_ENTROPY = ("weight", "ignore_index", "lse_square_scale", "label_smoothing", "reduction", "softcap",
                  "return_z_loss", "return_token_accuracy", "return_predicted_tokens")
_FUSED_LINEAR = ("ce_weight", "ignore_index", "lse_square_scale", "label_smoothing", "reduction", "softcap",
                 "return_z_loss", "accum_dtype", "use_token_scaling", "return_token_accuracy",
                 "return_predicted_tokens")
_RMS_NORM = ("hidden_size", "eps", "offset", "casting_mode", "init_fn", "in_place", "row_mode", "elementwise_affine")
_EXTRAS = dict(lse_square_scale=0.0, softcap=None, return_z_loss=False, return_token_accuracy=False,
               return_predicted_tokens=False)


def _loss_refusal(args: Arguments, weight: str, **extras) -> Refused | None:
    unsupported = differs(args, **_EXTRAS, **extras)
    if unsupported:
        return Refused(f"{unsupported} has no torch counterpart")
    if args.given(weight) and args.value("label_smoothing", 0.0) != 0.0:
        return Refused(f"{weight} with label_smoothing is not proven the same as torch's")
    return None


def cross_entropy(args: Arguments) -> Portable | Refused:
    refused = _loss_refusal(args, "weight")
    return refused or Portable("{torch}.nn.CrossEntropyLoss",
                               args.keywords("weight", "ignore_index", "reduction", "label_smoothing"),
                               "torch.nn.CrossEntropyLoss")


def fused_linear_cross_entropy(args: Arguments) -> Portable | Refused:
    refused = _loss_refusal(args, "ce_weight", accum_dtype=None, use_token_scaling=False)
    if refused:
        return refused
    keywords = args.keywords("ce_weight", "ignore_index", "reduction", "label_smoothing")
    spelled = "".join(f", {'weight' if name == 'ce_weight' else name}={{{name}}}" for name, _ in keywords)
    template = ("lambda lin_weight, _input, target, bias=None: {torch}.nn.functional.cross_entropy("
                "{torch}.nn.functional.linear(_input, lin_weight, bias), target" + spelled + ")")
    note = ("PL221", "the logits are computed in full (liger computes the loss chunk by chunk without them): "
                     "more memory for a large vocabulary")
    return Portable(template, keywords, "F.cross_entropy(F.linear(...)) in a lambda with its call signature",
                    (note,), whole=True)


def rms_norm(args: Arguments) -> Portable | Refused:
    unsupported = differs(args, offset=0.0, init_fn="ones")
    if unsupported:
        return Refused(f"{unsupported} has no torch.nn.RMSNorm counterpart")
    return Portable("{torch}.nn.RMSNorm", args.keywords("elementwise_affine", eps="1e-6"),
                    "torch.nn.RMSNorm (liger's eps=1e-6 made explicit)")


_MODULES = ("liger_kernel.transformers", "liger_kernel.transformers.cross_entropy",
            "liger_kernel.transformers.fused_linear_cross_entropy", "liger_kernel.transformers.rms_norm")
ROWS = {
    f"{module}.{name}": row
    for module in _MODULES
    for name, row in (
        ("LigerCrossEntropyLoss", Row(_CROSS_ENTROPY, cross_entropy, "PL126", "PL219", required=0)),
        ("LigerFusedLinearCrossEntropyLoss", Row(_FUSED_LINEAR, fused_linear_cross_entropy, "PL126", "PL219",
                                                 required=0)),
        ("LigerRMSNorm", Row(_RMS_NORM, rms_norm, "PL122", "PL219")),
    )
}
_PATCH_MODULES = ("liger_kernel.transformers", "liger_kernel.transformers.monkey_patch")


class Liger(LibraryCalls):
    TRIGGER = Words(whole=("liger_kernel",))
    ROWS = ROWS
    LIBRARIES = frozenset({"liger_kernel"})

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        """A statement that only calls `apply_liger_kernel_to_*`: dropped."""
        if len(original_node.body) != 1 or not isinstance(original_node.body[0], cst.Expr):
            return updated_node
        call = original_node.body[0].value
        if not isinstance(call, cst.Call) or self.excluded(call):
            return updated_node
        name = self._patch(call)
        if name is None:
            return updated_node
        self.converted("PL127", call, f"{name}(...) dropped", call.func)
        self.report("PL217", call, f"{name}: liger's Triton kernels need a Triton backend; the model keeps "
                                   "its stock torch layers")
        return updated_node.with_changes(body=[cst.Pass()],
                                         trailing_whitespace=cst.TrailingWhitespace(
                                             whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(DROPPED)))

    def _patch(self, call: cst.Call) -> str | None:
        if head_name(call.func) in self.fact(LEFT_TO_PROGRAM):
            return None
        name = self.qualified(call.func) or ""
        module, _, function = name.rpartition(".")
        return name if module in _PATCH_MODULES and function.startswith("apply_liger_kernel_to_") else None
