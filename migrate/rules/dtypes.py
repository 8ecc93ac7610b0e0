"""float64 on backends without native float64 (npu, musa): `torch.float64`, `torch.double`,
`torch.DoubleTensor`, `.double()`. Reported only for those targets: neutral and torch code may still
run on them, but there float64 is also the host's business, and most such uses are on the cpu."""

from __future__ import annotations

import libcst as cst
from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.base import ReferenceRule
from portlayer.migrate.rules.strings import is_method

_FLOAT64 = {"torch.float64", "torch.double", "torch.DoubleTensor", "torch.cuda.DoubleTensor"}


class Float64(ReferenceRule):
    TRIGGER = Words(("float64", "double"))

    @classmethod
    def fires_for(cls, target) -> bool:
        return not target.float64_native

    def reference(self, node) -> bool:
        if self.target.float64_native:
            return False
        name = self.qualified(node)
        if name in _FLOAT64:
            self.report("PL501", node, f"{name}: {self.target.name} has no native float64")
            return False
        return True

    def visit_Call(self, node: cst.Call) -> None:
        if not self.target.float64_native and is_method(node.func, "double") \
                and not node.args:
            self.report("PL501", node, f".double(): {self.target.name} has no native float64")
