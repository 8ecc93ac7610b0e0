"""`torch.cuda.X` -> the target's X: `portlayer.X`, `torch.accelerator.X`, `torch.npu.X`, ...

Also `torch.cuda.amp.autocast/GradScaler` where the Amp rule left them (not calls it could rewrite),
and `torch.cuda.nvtx.range` (-> `torch.profiler.record_function`). Legacy tensor types belong to their
own rule.
"""

from __future__ import annotations

import libcst as cst

from portlayer.migrate import cuda_api
from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.base import ReferenceRule, code_of

NameOrAttribute = cst.Name | cst.Attribute


def torch_cuda_suffix(qualified: str | None) -> str | None:
    """"synchronize" for "torch.cuda.synchronize", "" for "torch.cuda", None for anything else."""
    if qualified == "torch.cuda":
        return ""
    if qualified is not None and qualified.startswith("torch.cuda."):
        return cuda_api.normalise(qualified[len("torch.cuda."):])
    return None


def owned_elsewhere(suffix: str) -> bool:
    """Names other rules convert or report (the Amp rule runs first and rewrites the calls it can)."""
    return suffix in ("amp.custom_fwd", "amp.custom_bwd") or suffix.split(".")[0] in cuda_api.TENSOR_TYPES


class TorchCudaApi(ReferenceRule):
    TRIGGER = Words(("cuda",))

    def reference(self, node: NameOrAttribute) -> bool:
        suffix = torch_cuda_suffix(self.qualified(node))
        if suffix is None:
            return True
        if owned_elsewhere(suffix) or self.excluded(node):
            return False
        head = suffix.split(".")[0]
        if suffix == "":
            template = self.target.device_module
        elif head in cuda_api.GRAPHS:
            self.report("PL402", node, f"torch.cuda.{suffix}: CUDA graphs are CUDA-only")
            return False
        elif head == "nccl":
            self.report("PL410", node, f"torch.cuda.{suffix}: torch.cuda.nccl is NCCL-only")
            return False
        else:
            template = self.target.api(suffix)
        if template is None:
            self.report("PL401", node, f"torch.cuda.{suffix} has no equivalent on target '{self.target.name}'")
            return False
        self.replacements[node] = replacement = self.expression(template)
        shown = code_of(replacement)
        code = {"amp": "PL103", "nvtx": "PL109"}.get(head, "PL102")
        self.changed(code, node, f"torch.cuda.{suffix} -> {shown}" if suffix else f"torch.cuda -> {shown}")
        return False
