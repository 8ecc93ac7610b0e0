"""float64 on backends without native float64 (npu, musa, hpu): `torch.float64`, `torch.double`,
`torch.DoubleTensor`, `.double()`.

A vendor target without it gets a warning at each site (PL501). Neutral and torch output is meant to run
on those backends too, so there the first site of a file is reported once, at info level, naming the
backends whose records list the risk (PL502); most such uses are on the cpu, where float64 is the host's.
"""

from __future__ import annotations

import libcst as cst

from portlayer.backends import PROBE_ORDER
from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.base import ReferenceRule
from portlayer.migrate.rules.strings import is_method

_FLOAT64 = {"torch.float64", "torch.double", "torch.DoubleTensor", "torch.cuda.DoubleTensor"}


def _backends_without(dtype: str) -> str:
    return ", ".join(sorted(backend.name for backend in PROBE_ORDER if dtype in backend.dtype_risks))


class Float64(ReferenceRule):
    TRIGGER = Words(("float64", "double"))

    @classmethod
    def fires_for(cls, target) -> bool:
        return not (target.is_vendor and target.float64_native)

    @classmethod
    def file_words(cls, target) -> Words:
        # On neutral and torch a float64 is worth a note only in a file with CUDA code.
        return cls.TRIGGER if target.is_vendor else Words()

    def __init__(self, *args):
        super().__init__(*args)
        self.noted = False  # neutral and torch: the file's one PL502 is given

    def reference(self, node) -> bool:
        name = self.qualified(node)
        if name in _FLOAT64:
            self._float64(node, name)
            return False
        return True

    def visit_Call(self, node: cst.Call) -> None:
        if is_method(node.func, "double") and not node.args:
            self._float64(node, ".double()")

    def _float64(self, node: cst.CSTNode, what: str) -> None:
        if self.target.is_vendor:
            self.report("PL501", node, f"{what}: {self.target.name} has no native float64")
        elif not self.noted:
            self.noted = True
            self.report("PL502", node, f"{what}: no native float64 on {_backends_without('float64')} "
                                       "(reported once per file)")
