"""`nvidia-smi` run from Python (`subprocess.check_output(["nvidia-smi", ...])`, `which("nvidia-smi")`):
it lists NVIDIA GPUs only, so on the target it is missing or finds none. A string that names it as a
command word, in code (docstrings aside), is reported for every target (PL417) with the target's own tool,
as shell scripts are (PL603). Never rewritten: the vendors' tools take other arguments and print
other columns, which the program goes on to parse.
"""

from __future__ import annotations

import libcst as cst

from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.base import Rule
from portlayer.migrate.rules.strings import is_docstring
from portlayer.migrate.shell import NVIDIA_SMI, smi_hint


class NvidiaSmi(Rule):
    TRIGGER = Words(("nvidia-smi",))

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = node.evaluated_value
        if isinstance(value, str) and not is_docstring(self.parent(node)):
            self._report_if_named(node, value)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        text = "".join(part.value for part in node.parts if isinstance(part, cst.FormattedStringText))
        self._report_if_named(node, text)

    def _report_if_named(self, node: cst.CSTNode, text: str) -> None:
        if NVIDIA_SMI.search(text):
            self.report("PL417", node, "nvidia-smi run from Python sees NVIDIA GPUs only", smi_hint(self.target.name))
