"""`torch.backends.cudnn.*` and `torch.backends.cuda.*` switches.

They are harmless off CUDA but do nothing there, which matters for `cudnn.deterministic` (PL301: the
run is no longer deterministic). musa: muDNN switches with cuDNN's names are converted (PL108).
"""

from __future__ import annotations

from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.base import ReferenceRule


def backend_flag(qualified: str | None) -> tuple[str, str] | None:
    """("cudnn", "benchmark") for "torch.backends.cudnn.benchmark", likewise for torch.backends.cuda."""
    if qualified is None:
        return None
    for library in ("cudnn", "cuda"):
        prefix = f"torch.backends.{library}."
        if qualified.startswith(prefix):
            return library, qualified[len(prefix):]
    return None


class BackendFlags(ReferenceRule):
    # `backends.cudnn.x`, `backends.cuda.x`, or a name bound by an import that spells one of them.
    TRIGGER = Words(("cuda", "cudnn"))

    def reference(self, node) -> bool:
        flag = backend_flag(self.qualified(node))
        if flag is None:
            return True
        library, name = flag
        if library == "cuda":
            self.report("PL303", node, f"torch.backends.cuda.{name} has no effect off CUDA")
        elif name in self.target.cudnn_flags and not self.excluded(node):
            self.replacements[node] = self.expression(self.target.cudnn_flags[name])
            self.changed("PL108", node, f"torch.backends.cudnn.{name} -> {self.target.cudnn_flags[name]}")
        elif name == "deterministic":
            self.report("PL301", node)
        else:
            self.report("PL302", node, f"torch.backends.cudnn.{name} has no effect on target '{self.target.name}'")
        return False
