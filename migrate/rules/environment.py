"""`CUDA_VISIBLE_DEVICES`, `NCCL_*` and the CUDA-only settings (`PYTORCH_CUDA_ALLOC_CONF`,
`CUDA_DEVICE_MAX_CONNECTIONS`, `TORCH_NCCL_*`, ...) named in Python (`os.environ[...]`, `os.getenv(...)`,
an env dict for a subprocess...). These names mean nothing else, so any string literal spelling one
exactly is one; the names are the shell scripts' (`migrate/variables.py`).

CUDA-only settings: reported for every target (PL607), as in shell scripts.

npu / musa: renamed to the vendor's variable where portlayer's backend table has one (PL107); one
whose value takes other units (PL608) or that has no equivalent (PL605) is reported. neutral: left as
is, the runtime translates them at start-up (PL606, info). torch: there is no device-generic variable
(PL607).
"""

from __future__ import annotations

import libcst as cst

from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.base import Rule
from portlayer.migrate.rules.strings import is_docstring, string_value
from portlayer.migrate.variables import is_cuda_only, is_interesting


class EnvironmentVariables(Rule):
    TRIGGER = Words(("CUDA_", "NCCL_", "NVML_"))

    def leave_SimpleString(self, original_node: cst.SimpleString, updated_node: cst.SimpleString):
        name = string_value(original_node)
        if name is None or not is_interesting(name) or is_docstring(self.parent(original_node)):
            return updated_node
        if is_cuda_only(name):
            self.report("PL607", original_node, f"{name} only affects CUDA; left as is")
            return updated_node
        if self.target.name == "neutral":
            self.report("PL606", original_node, f"{name} left as is: the portlayer runtime translates it")
            return updated_node
        if self.target.name == "torch":
            self.report("PL607", original_node, f"{name} has no device-generic equivalent")
            return updated_node
        renamed, units_differ = self.target.env.get(name, (None, False))
        if renamed is None:
            self.report("PL605", original_node, f"{name} has no {self.target.name} equivalent")
            return updated_node
        if units_differ:
            self.report("PL608", original_node, f"{name} -> {renamed} takes different units")
            return updated_node
        if self.excluded(original_node):
            return updated_node
        self.changed("PL107", original_node, f"{name} -> {renamed}", needs_runtime=False)
        quote_at = len(original_node.prefix) + len(original_node.quote)
        value = original_node.value
        return updated_node.with_changes(value=value[:quote_at] + renamed + value[quote_at + len(name):])
