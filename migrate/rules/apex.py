"""NVIDIA apex (and its `amp_C` extension) rewritten into portable torch where torch computes the same thing.

Sources: NVIDIA/apex@6424da3b (apex/optimizers/fused_adam.py, fused_sgd.py, csrc/multi_tensor_adam.cu,
csrc/multi_tensor_sgd_kernel.cu, apex/normalization/fused_layer_norm.py, apex/parallel/distributed.py,
csrc/multi_tensor_l2norm_kernel.cu). Each row's equivalence is tested numerically in
tests/migrate/test_library_numerics.py; what is not exact is listed in docs/migrate.md.

- `FusedAdam` is Adam with decoupled weight decay by default (`adam_w_mode=True`): `torch.optim.AdamW`,
  with apex's `weight_decay=0.0` made explicit (AdamW's is 0.01); `adam_w_mode=False` adds the decay to
  the gradient: `torch.optim.Adam`. `bias_correction=False`, `amsgrad`, `capturable`, `master_weights`
  have no torch equivalent: reported. `set_grad_none=False` (zeroed, not freed, grads) is a note.
- `FusedSGD` is `torch.optim.SGD` unless `wd_after_momentum=True`. Its `zero_grad()` zeroes grads
  (`set_grad_none=False` is its default); torch's frees them: a note.
- `FusedLAMB`, `FusedMixedPrecisionLamb`, `FusedNovoGrad`, `FusedAdagrad` have no torch optimizer that
  computes the same update: reported (PL213).
- `FusedLayerNorm`, `MixedFusedLayerNorm` -> `nn.LayerNorm`; `FusedRMSNorm`, `MixedFusedRMSNorm` ->
  `nn.RMSNorm` with apex's eps (1e-5) made explicit (RMSNorm's default is the dtype's machine epsilon).
  apex runs exactly these (`F.layer_norm`, `manual_rms_norm`) on a tensor not on CUDA. The Mixed
  variants return the parameters' dtype for half inputs: a note (PL218).
- `apex.parallel.DistributedDataParallel` -> torch's (both average gradients over the ranks);
  `convert_syncbn_model` -> `nn.SyncBatchNorm.convert_sync_batchnorm`.
- `multi_tensor_applier(amp_C.multi_tensor_l2norm, overflow_buf, [tensors], per_tensor)` -> the same
  pair of norms from `torch.nn.utils.get_total_norm` and `torch._foreach_norm`; the overflow buffer is no
  longer written (PL220).
- `apex.amp.initialize` / `amp.scale_loss`: reported (PL215); the hint says how.
"""

from __future__ import annotations

import libcst as cst

from portlayer.migrate.engine.printing import code_of
from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.library_calls import (
    UNREAD,
    Arguments,
    LibraryCalls,
    Portable,
    Refused,
    Row,
    differs,
)

_ADAM = ("params", "lr", "bias_correction", "betas", "eps", "adam_w_mode", "weight_decay", "amsgrad",
         "set_grad_none", "capturable", "master_weights")
_SGD = ("params", "lr", "momentum", "dampening", "weight_decay", "nesterov", "wd_after_momentum",
        "materialize_master_grads", "set_grad_none")
_NORM = ("normalized_shape", "eps", "elementwise_affine", "memory_efficient")
_DDP = ("module", "message_size", "delay_allreduce", "shared_param", "allreduce_trigger_params",
        "retain_allreduce_buffers", "allreduce_always_fp32", "num_allreduce_streams", "allreduce_communicators",
        "gradient_average", "gradient_predivide_factor", "gradient_average_split_factor", "prof")
_INITIALIZE = ("models", "optimizers", "enabled", "opt_level", "cast_model_type", "patch_torch_functions",
               "keep_batchnorm_fp32", "master_weights", "loss_scale", "cast_model_outputs", "num_losses",
               "verbosity", "min_loss_scale", "max_loss_scale")
_SCALE_LOSS = ("loss", "optimizers", "loss_id", "model", "delay_unscale", "delay_overflow_check")
_ZEROED_GRADS = ("PL214", "its zero_grad() zeroes the grads; torch's frees them (set_to_none=True): call "
                          "zero_grad(set_to_none=False) where the program reads .grad after it")


def fused_adam(args: Arguments) -> Portable | Refused:
    unsupported = differs(args, bias_correction=True, amsgrad=False, capturable=False, master_weights=False)
    if unsupported:
        return Refused(f"{unsupported} has no torch equivalent")
    mode = args.value("adam_w_mode", True)
    if mode is UNREAD:
        return Refused("adam_w_mode chosen at run time (AdamW or Adam)")
    notes = (_ZEROED_GRADS,) if args.value("set_grad_none", True) is not True else ()
    optimizer = "AdamW" if mode else "Adam"
    explicit = "" if args.given("weight_decay") else "apex's weight_decay=0.0 made explicit; "
    return Portable(f"{{torch}}.optim.{optimizer}", args.keywords("lr", "betas", "eps", weight_decay="0.0"),
                    f"torch.optim.{optimizer} ({explicit}moments kept in the parameters' dtype, apex's in fp32: "
                    "the same for fp32 parameters)", notes)


def fused_sgd(args: Arguments) -> Portable | Refused:
    unsupported = differs(args, wd_after_momentum=False)
    if unsupported:
        return Refused(f"{unsupported} has no torch equivalent")
    notes = (_ZEROED_GRADS,) if args.value("set_grad_none", False) is not True else ()
    return Portable("{torch}.optim.SGD", args.keywords("lr", "momentum", "dampening", "weight_decay", "nesterov"),
                    "torch.optim.SGD", notes)


def no_torch_optimizer(args: Arguments) -> Refused:
    return Refused("torch has no optimizer with the same update")


def layer_norm(args: Arguments) -> Portable:
    return Portable("{torch}.nn.LayerNorm", args.keywords("eps", "elementwise_affine"),
                    "torch.nn.LayerNorm (memory_efficient only changes what backward keeps)")


def rms_norm(args: Arguments) -> Portable:
    return Portable("{torch}.nn.RMSNorm", args.keywords("elementwise_affine", eps="1e-5"),
                    "torch.nn.RMSNorm (apex's eps=1e-5 made explicit; memory_efficient only changes what "
                    "backward keeps)")


def _mixed(convert):
    def mixed(args: Arguments) -> Portable | Refused:
        if args.value("elementwise_affine", True) is not True:
            return Refused("elementwise_affine=False is an error in apex")
        portable = convert(args)
        note = ("PL218", "apex returns the parameters' dtype for a half input; torch needs input and "
                         "parameters of one dtype (run it under autocast, or cast the input)")
        return Portable(portable.template, tuple((k, v) for k, v in portable.keywords if k != "elementwise_affine"),
                        portable.message, (note,))
    return mixed


def distributed_data_parallel(args: Arguments) -> Portable | Refused:
    unsupported = differs(args, gradient_average=True, allreduce_always_fp32=False,
                          gradient_average_split_factor=None)
    if unsupported:
        return Refused(f"{unsupported} has no torch DistributedDataParallel equivalent")
    return Portable("{torch}.nn.parallel.DistributedDataParallel", (),
                    "torch.nn.parallel.DistributedDataParallel (both average the gradients over the ranks; "
                    "torch overlaps the all-reduce with backward, as apex's delay_allreduce=False does, and "
                    "its bucketing replaces message_size and the stream options)")


def convert_syncbn_model(args: Arguments) -> Portable | Refused:
    unsupported = differs(args, channel_last=False)
    if unsupported:
        return Refused(f"{unsupported} has no torch equivalent")
    return Portable("{torch}.nn.SyncBatchNorm.convert_sync_batchnorm", args.keywords("process_group"),
                    "torch.nn.SyncBatchNorm.convert_sync_batchnorm")


def amp_report(args: Arguments) -> Refused:
    level = args.value("opt_level") if args.given("opt_level") else None
    return Refused("torch.autocast and torch.amp.GradScaler replace it around the forward, backward and step"
                   + (f" (opt_level={level}: see the hint)" if isinstance(level, str) else ""))


_OPTIMIZERS = "apex.optimizers"
_NORMALIZATION = "apex.normalization"
_ROWS = {
    "FusedAdam": Row(_ADAM, fused_adam, "PL121", "PL213"),
    "FusedSGD": Row(_SGD, fused_sgd, "PL121", "PL213"),
    **{name: Row(("params",), no_torch_optimizer, "PL121", "PL213")
       for name in ("FusedLAMB", "FusedMixedPrecisionLamb", "FusedNovoGrad", "FusedAdagrad")},
}
ROWS = {
    **{f"{_OPTIMIZERS}.{name}": row for name, row in _ROWS.items()},
    **{f"{_OPTIMIZERS}.{module}.{name}": _ROWS[name] for name, module in (
        ("FusedAdam", "fused_adam"), ("FusedSGD", "fused_sgd"), ("FusedLAMB", "fused_lamb"),
        ("FusedMixedPrecisionLamb", "fused_mixed_precision_lamb"), ("FusedNovoGrad", "fused_novograd"),
        ("FusedAdagrad", "fused_adagrad"))},
    **{f"{_NORMALIZATION}{module}.{name}": Row(_NORM[:2] if "Mixed" in name else _NORM, convert, "PL122", "PL213")
       for module in ("", ".fused_layer_norm")
       for name, convert in (("FusedLayerNorm", layer_norm), ("FusedRMSNorm", rms_norm),
                             ("MixedFusedLayerNorm", _mixed(layer_norm)), ("MixedFusedRMSNorm", _mixed(rms_norm)))},
    **{f"apex.parallel{module}.DistributedDataParallel": Row(_DDP, distributed_data_parallel, "PL123", "PL213")
       for module in ("", ".distributed")},
    **{f"apex.parallel{module}.convert_syncbn_model": Row(("module", "process_group", "channel_last"),
                                                          convert_syncbn_model, "PL123", "PL213")
       for module in ("", ".sync_batchnorm")},
    **{f"apex.amp{module}.initialize": Row(_INITIALIZE, amp_report, "PL121", "PL215", required=0)
       for module in ("", ".frontend")},
    **{f"apex.amp{module}.scale_loss": Row(_SCALE_LOSS, amp_report, "PL121", "PL215", required=0)
       for module in ("", ".handle")},
}

_L2NORM = "amp_C.multi_tensor_l2norm"


class Apex(LibraryCalls):
    TRIGGER = Words(whole=("apex", "amp_C"))
    ROWS = ROWS
    LIBRARIES = frozenset({"apex", "amp_C"})

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if self._is_l2norm(original_node):
            return self._l2norm(original_node, updated_node)
        return super().leave_Call(original_node, updated_node)

    def _is_l2norm(self, call: cst.Call) -> bool:
        name = self.qualified(call.func) or ""
        return (name.rsplit(".", 1)[-1] == "multi_tensor_applier" and bool(call.args)
                and self.qualified(call.args[0].value) == _L2NORM and not self.excluded(call))

    def _l2norm(self, original: cst.Call, node: cst.Call) -> cst.BaseExpression:
        args = node.args
        lists = args[2].value if len(args) > 2 else None
        if (len(args) not in (3, 4) or any(a.keyword or a.star for a in args)
                or not isinstance(lists, cst.List) or len(lists.elements) != 1):
            self.report("PL213", original, f"{_L2NORM}: arguments not in apex's form "
                                           "(op, overflow_buf, [tensors], per_tensor); left as is")
            return node
        tensors = lists.elements[0].value
        per_tensor = Arguments(node, ("op", "buf", "lists", "per_tensor")).value("per_tensor", False)
        if per_tensor is UNREAD:
            self.report("PL213", original, f"{_L2NORM}: per_tensor chosen at run time; left as is")
            return node
        per = "{torch}.stack({torch}._foreach_norm({t})).float()" if per_tensor else "None"
        template = "({torch}.nn.utils.get_total_norm({t}).float().reshape(1), " + per + ")"
        self.converted("PL124", original, f"multi_tensor_applier({_L2NORM}, ...) -> torch.nn.utils.get_total_norm"
                                          + (" and torch._foreach_norm" if per_tensor else ""), node.func, args[0].value)
        self.report("PL220", original, f"{_L2NORM}: the overflow buffer `{code_of(args[1].value)}` is no longer set; "
                                       "test torch.isfinite(norm) where the program reads it")
        return self.expression(template, t=tensors)
