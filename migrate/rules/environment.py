"""`CUDA_VISIBLE_DEVICES`, `NCCL_*`, `PYTORCH_CUDA_ALLOC_CONF` and the CUDA-only settings
(`CUDA_DEVICE_MAX_CONNECTIONS`, `TORCH_NCCL_*`, ...) named in Python (`os.environ[...]`, `os.getenv(...)`,
an env dict for a subprocess...). These names mean nothing else, so any string literal spelling one
exactly is one; the names are the shell scripts' (`migrate/variables.py`).

CUDA-only settings: reported for every target (PL607), as in shell scripts.

npu / musa: renamed to the vendor's variable where portlayer's backend table has one (PL107); one
whose value takes other units (PL608), that has no equivalent (PL605), or that is set beside its name to a
value the vendor's variable does not take (PL614: `backend:cudaMallocAsync`) is reported. neutral: left as
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
        alias = self.target.env.get(name)
        if alias is None:
            self.report("PL605", original_node, f"{name} has no {self.target.name} equivalent")
            return updated_node
        if alias.convert is not None:
            self.report("PL608", original_node, f"{name} -> {alias.target} takes different units")
            return updated_node
        value = self._value_given(original_node)
        if value is not None and not alias.carries(value):
            self.report("PL614", original_node, f"{name}={value}: {alias.target} does not take this value; left as is")
            return updated_node
        if self.excluded(original_node):
            return updated_node
        renamed = alias.target
        self.changed("PL107", original_node, f"{name} -> {renamed}", needs_runtime=False)
        quote_at = len(original_node.prefix) + len(original_node.quote)
        value = original_node.value
        return updated_node.with_changes(value=value[:quote_at] + renamed + value[quote_at + len(name):])

    def _value_given(self, name: cst.SimpleString) -> str | None:
        """The string the program sets the variable to, where it says it beside the name:
        `environ[name] = "v"`, `{name: "v"}`, `environ.setdefault(name, "v")`; else None."""
        parent = self.parent(name)
        if isinstance(parent, cst.DictElement) and parent.key is name:
            return string_value(parent.value)
        if isinstance(parent, cst.Arg):
            call = self.parent(parent)
            if isinstance(call, cst.Call) and len(call.args) >= 2 and call.args[0] is parent:
                return string_value(call.args[1].value)
            return None
        if isinstance(parent, cst.Index):
            subscript = self.parent(self.parent(parent))
            target = self.parent(subscript)
            if isinstance(target, cst.AssignTarget):
                return string_value(self.parent(target).value)
        return None
