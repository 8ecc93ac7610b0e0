"""CUDA-only names outside `torch.cuda`'s mirrored surface, reported (nothing rewritten):

- `torch.profiler.ProfilerActivity.CUDA` and a profiler's `use_cuda=` (PL408): record CUDA kernels only.
  Each vendor profiles its kernels its own way (torch_npu's own `ProfilerActivity.NPU`,
  `ProfilerActivity.XPU`, PrivateUse1 where the plugin registers a profiler), so no one spelling is right;
- `torch.version.cuda` (PL409): None off CUDA, which breaks `version.parse(torch.version.cuda)`;
- `torch.cuda.nccl` imports (PL410; its uses are reported by the API rule);
- `torch._C._cuda_*` private bindings (PL401, like a torch.cuda name the target lacks), or PL411 (info) where
  the program probes for the binding first (`if hasattr(torch._C, "_cuda_x"): ...`), as it already dispatches.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.base import ReferenceRule, dotted
from portlayer.migrate.rules.strings import string_value

_PROFILER_ACTIVITY = frozenset({
    "torch.profiler.ProfilerActivity.CUDA",
    "torch.autograd.ProfilerActivity.CUDA",
    "torch.autograd.profiler.ProfilerActivity.CUDA",
    "torch._C._profiler.ProfilerActivity.CUDA",
})
_PROFILER_MODULES = ("torch.profiler.", "torch.autograd.profiler.", "torch.autograd.profiler_legacy.")
_NCCL = "torch.cuda.nccl"
_PRIVATE = "torch._C._cuda"
_HASATTR = m.Call(func=m.Name("hasattr"), args=[m.Arg(keyword=None), m.Arg(value=m.SimpleString(), keyword=None)])
_PROBED_HINT = ("a torch built without CUDA (the vendors', the cpu's) lacks it, so the program's other branch "
                "runs there; nothing to change")


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
        elif name.startswith(_PRIVATE) and self._probed(node, name):
            self.report("PL411", node, f"{name} is probed first (`hasattr`): its branch runs only where torch "
                                       "has the binding, a CUDA build", _PROBED_HINT)
        elif name.startswith(_PRIVATE):
            self.report("PL401", node, f"{name} is a private CUDA binding with no equivalent on target "
                                       f"'{self.target.name}'")
        else:
            return True
        return False

    def _probed(self, node: cst.CSTNode, name: str) -> bool:
        """`node` runs only where `hasattr(<owner>, "<binding>")` held: it is in the body of an `if` that tests
        it, or after it in an `and` (Megatron-LM's `if hasattr(_C, '_cuda_setRNGState') and callable(...)`)."""
        child, parent = node, self._parent_or_none(node)
        while parent is not None:
            if isinstance(parent, cst.If) and child is parent.body and self._tests_hasattr(parent.test, name):
                return True
            if isinstance(parent, cst.BooleanOperation) and isinstance(parent.operator, cst.And) \
                    and child is parent.right and self._tests_hasattr(parent.left, name):
                return True
            child, parent = parent, self._parent_or_none(parent)
        return False

    def _parent_or_none(self, node: cst.CSTNode) -> cst.CSTNode | None:
        try:
            return self.parent(node)
        except KeyError:  # the module
            return None

    def _tests_hasattr(self, test: cst.BaseExpression, name: str) -> bool:
        owner, _, attribute = name.rpartition(".")
        for call in m.findall(test, _HASATTR):
            probed, text = call.args[0].value, string_value(call.args[1].value)
            if text == attribute and self.qualified(probed) == owner:
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
