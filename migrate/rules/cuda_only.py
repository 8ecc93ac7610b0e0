"""CUDA-only names outside `torch.cuda`'s mirrored surface, reported (nothing rewritten):

- `torch.profiler.ProfilerActivity.CUDA` and a profiler's `use_cuda=` (PL408): record CUDA kernels only.
  Each vendor profiles its kernels its own way (torch_npu's own `ProfilerActivity.NPU`,
  `ProfilerActivity.XPU`, PrivateUse1 where the plugin registers a profiler), so no one spelling is right;
- `torch.version.cuda` (PL409): None off CUDA, which breaks `version.parse(torch.version.cuda)`;
- `torch.cuda.nccl` imports (PL410; its uses are reported by the API rule);
- `torch._C._cuda_*` private bindings (PL401, like a torch.cuda name the target lacks).
"""

from __future__ import annotations

import libcst as cst

from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.base import ReferenceRule, dotted

_PROFILER_ACTIVITY = frozenset({
    "torch.profiler.ProfilerActivity.CUDA",
    "torch.autograd.ProfilerActivity.CUDA",
    "torch.autograd.profiler.ProfilerActivity.CUDA",
    "torch._C._profiler.ProfilerActivity.CUDA",
})
_PROFILER_MODULES = ("torch.profiler.", "torch.autograd.profiler.", "torch.autograd.profiler_legacy.")
_NCCL = "torch.cuda.nccl"
_PRIVATE = "torch._C._cuda"


def is_nccl_module(module: str) -> bool:
    return module == _NCCL or module.startswith(_NCCL + ".")


class CudaOnlyNames(ReferenceRule):
    # Every way to these names spells "cuda" or "nccl" in the statement (`ProfilerActivity.CUDA`,
    # `version.cuda`, `_cuda_*`) or in the import that binds the name the statement reads.
    TRIGGER = Words(("cuda", "nccl"))

    def reference(self, node: cst.Name | cst.Attribute) -> bool:
        name = self.qualified(node)
        if name is None:
            return True
        if name in _PROFILER_ACTIVITY:
            self.report("PL408", node, f"{name} records CUDA kernels only")
        elif name == "torch.version.cuda":
            self.report("PL409", node)
        elif name.startswith(_PRIVATE):
            self.report("PL401", node, f"{name} is a private CUDA binding with no equivalent on target "
                                       f"'{self.target.name}'")
        else:
            return True
        return False

    def visit_Call(self, node: cst.Call) -> None:
        use_cuda = next((arg for arg in node.args if arg.keyword is not None and arg.keyword.value == "use_cuda"), None)
        if use_cuda is None or (isinstance(use_cuda.value, cst.Name) and use_cuda.value.value == "False"):
            return
        name = self.qualified(node.func)
        if name is not None and name.startswith(_PROFILER_MODULES):
            self.report("PL408", use_cuda, f"{name}(use_cuda=...) records CUDA kernels only")

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            module = dotted(alias.name) or ""
            if is_nccl_module(module):
                self.report("PL410", alias, f"{module} is NCCL-only")
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if node.relative or node.module is None:
            return False
        module = dotted(node.module) or ""
        names = () if isinstance(node.names, cst.ImportStar) else [dotted(a.name) for a in node.names]
        if is_nccl_module(module) or (module == "torch.cuda" and "nccl" in names):
            self.report("PL410", node, f"{_NCCL} is NCCL-only")
        return False
