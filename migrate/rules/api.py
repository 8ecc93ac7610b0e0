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


AMP_DECORATORS = ("amp.custom_fwd", "amp.custom_bwd")


def owned_elsewhere(suffix: str) -> bool:
    """Names other rules convert or report (the Amp rule runs first and rewrites the calls it can)."""
    return suffix in AMP_DECORATORS or suffix.split(".")[0] in cuda_api.TENSOR_TYPES


class TorchCudaApi(ReferenceRule):
    TRIGGER = Words(("cuda",))

    def reference(self, node: NameOrAttribute) -> bool:
        suffix = torch_cuda_suffix(self.qualified(node))
        if suffix is None:
            return True
        if suffix in AMP_DECORATORS and not self.excluded(node):
            # The Amp rule converted each call and decorator: this one is a value (Megatron-LM's
            # `custom_fwd = torch.cuda.amp.custom_fwd`), which has no one-name counterpart.
            self.report("PL401", node, f"torch.cuda.{suffix} taken as a value: left as is",
                        f"use `functools.partial(torch.amp.{suffix[4:]}, device_type=...)` with the target's "
                        "device type, as the decorator is converted")
            return False
        if owned_elsewhere(suffix) or self.excluded(node):
            return False
        template = self.template_or_report(node, suffix)
        if template is None:
            return False
        self.replacements[node] = replacement = self.expression(template)
        shown = code_of(replacement)
        code = {"amp": "PL103", "nvtx": "PL109"}.get(suffix.split(".")[0], "PL102")
        self.changed(code, node, f"torch.cuda.{suffix} -> {shown}" if suffix else f"torch.cuda -> {shown}")
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        """A torch.cuda name with no equivalent stays imported after its uses are reported: the import
        is a site of its own (`from torch.cuda._graph_annotations import mark_kernels`), reported as they
        are. A namespace whose members the tables convert (`from torch.cuda import amp`) is not."""
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return False
        module = code_of(node.module)
        for alias in node.names:
            suffix = torch_cuda_suffix(f"{module}.{code_of(alias.name)}")
            # CudaOnlyNames reports an import of torch.cuda.nccl itself.
            if suffix is None or suffix in cuda_api.NAMESPACES or suffix in cuda_api.AMP_NAMES or suffix.startswith("nccl"):
                continue
            if not owned_elsewhere(suffix) and not self.excluded(alias):
                self.template_or_report(alias, suffix)
        return False

    def template_or_report(self, node: cst.CSTNode, suffix: str) -> str | None:
        """The target's template for `torch.cuda.<suffix>`; None, with the site reported, where it has none."""
        head = suffix.split(".")[0]
        if suffix == "":
            return self.target.device_module
        if head in cuda_api.GRAPHS:
            self.report("PL402", node, f"torch.cuda.{suffix}: CUDA graphs are CUDA-only")
            return None
        if head == "nccl":
            self.report("PL410", node, f"torch.cuda.{suffix}: torch.cuda.nccl is NCCL-only")
            return None
        template = self.target.api(suffix)
        if template is None:
            self.report("PL401", node, f"torch.cuda.{suffix} has no equivalent on target '{self.target.name}'",
                        cuda_api.NO_EQUIVALENT_HINTS.get(suffix))
        return template
