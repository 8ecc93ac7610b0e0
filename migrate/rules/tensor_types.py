"""Legacy CUDA tensor types: `torch.cuda.FloatTensor(...)` and friends.

vendors: `torch.npu.FloatTensor` (torch_npu and torch_musa keep the legacy types). neutral / torch:
a call whose meaning is certain is rewritten, data (a list or tuple literal) to `torch.tensor(data,
dtype=..., device=...)` and sizes (integer literals) to `torch.empty(sizes, dtype=..., device=...)`;
anything else (`isinstance` checks, `.type(...)`, a size or data held in a variable) is reported.
"""

from __future__ import annotations

import re

import libcst as cst

from portlayer.migrate import cuda_api
from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.base import Rule, code_of
from portlayer.migrate.rules.strings import is_docstring, string_value

_TYPE_STRING = re.compile(r"torch\.cuda\.(\w+Tensor)")


class LegacyTensorTypes(Rule):
    # Only torch.cuda's types: imported from it or spelled "torch.cuda.FloatTensor" (torch.LongTensor
    # annotations are everywhere and never fire).
    TRIGGER = Words(("cuda",))

    def tensor_type(self, node: cst.CSTNode) -> str | None:
        name = self.qualified(node)
        if name is None or not name.startswith("torch.cuda."):
            return None
        suffix = name[len("torch.cuda."):]
        return suffix if suffix in cuda_api.TENSOR_TYPES else None

    def visit_Call(self, node: cst.Call) -> None:
        kind = self.tensor_type(node.func)
        if kind is None or self.target.is_vendor or self.excluded(node):
            return
        dtype = cuda_api.TENSOR_TYPES[kind]
        args = node.args
        if any(arg.keyword is not None or arg.star for arg in args):
            return
        if len(args) == 1 and isinstance(args[0].value, (cst.List, cst.Tuple)):
            factory, data = "tensor", args[0].value
        elif all(isinstance(arg.value, cst.Integer) for arg in args):
            factory, data = "empty", None
        else:
            return
        values = [code_of(data)] if data is not None else \
            [arg.value.value for arg in args] or ["0"]
        device = self.target.device
        template = f"{{torch}}.{factory}({', '.join(values)}, dtype={{torch}}.{dtype}, device={device})"
        self.replacements[node] = self.expression(template)
        self.changed("PL106", node, f"torch.cuda.{kind}(...) -> torch.{factory}(..., dtype=torch.{dtype})")

    def leave_Call(self, original_node, updated_node):
        return self.replacements.get(original_node, updated_node)

    def _reference(self, original, updated):
        kind = self.tensor_type(original)
        if kind is None or self.excluded(original) or self._in_rewritten_call(original):
            return updated
        if self.target.is_vendor:
            self.changed("PL106", original, f"torch.cuda.{kind} -> torch.{self.target.vendor}.{kind}")
            return self.expression(f"{{torch}}.{self.target.vendor}.{kind}")
        self.report("PL406", original, f"torch.cuda.{kind} cannot be converted safely here")
        return updated

    def _in_rewritten_call(self, node: cst.CSTNode) -> bool:
        parent = self.parent(node)
        return isinstance(parent, cst.Call) and parent.func is node and parent in self.replacements

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return self.tensor_type(node) is None

    def leave_Attribute(self, original_node, updated_node):
        return self._reference(original_node, updated_node)

    def leave_Name(self, original_node, updated_node):
        return self._reference(original_node, updated_node)

    def leave_SimpleString(self, original_node, updated_node):
        # x.type("torch.cuda.FloatTensor")
        match = _TYPE_STRING.fullmatch(string_value(original_node) or "")
        if match is None or match.group(1) not in cuda_api.TENSOR_TYPES or self.excluded(original_node) \
                or is_docstring(self.parent(original_node)):
            return updated_node
        if self.target.is_vendor:
            self.changed("PL106", original_node, f"{match.group(0)} -> torch.{self.target.vendor}.{match.group(1)}",
                         needs_runtime=True)
            return updated_node.with_changes(value=updated_node.value.replace("torch.cuda.", f"torch.{self.target.vendor}.", 1))
        self.report("PL406", original_node, f"{match.group(0)} names a legacy CUDA tensor type")
        return updated_node
