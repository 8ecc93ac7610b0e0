"""An int given as a device means a CUDA device: `.to(self.gpu_id)`, `model.to(local_rank)`,
`torch.zeros(2, device=rank)`. Where the file provably makes the value an int (`portlayer.migrate.engine.dataflow`),
the rewrite names the target's device (`.to(portlayer.device(self.gpu_id))`), which is the cpu where there
is no accelerator; a value named like a GPU index that is not provably an int is reported (PL412).

Vendor targets keep the int: their plugins map an index to their own device.

`device = 0`, an int literal held by a name the file gives as a device, is reported where it is assigned
(PL412, `IntDeviceAssignments`): its uses may be anywhere, under any name, in statements the rules are
not shown.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from portlayer.migrate.engine.dataflow import CURRENT_DEVICES_HELD, INT_DEVICE_ASSIGNMENTS, INT_NAMES
from portlayer.migrate.engine.regions import USER_EXCLUSIONS
from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.base import FileRule, Rule, code_of, dotted
from portlayer.migrate.rules.strings import is_method

# Names that hold a GPU index in training code (the last part of `self.gpu_id`, `args.local_rank`).
INDEX_NAMES = ("gpu", "gpu_id", "gpu_idx", "gpu_index", "local_gpu", "local_rank", "device_id", "device_idx",
               "device_index", "rank")
# Names that hold GPU indices, given as a device one item at a time (`.to(device_ids[0])`).
INDEX_LIST_NAMES = ("device_ids", "gpu_ids", "gpus")


def device_arguments(node: cst.Call, qualified: Callable[[cst.CSTNode], str | None]) -> list[cst.BaseExpression]:
    """The values `node` takes as a device: `.to(x)`'s first argument, and a torch function's or any method's
    `device=` (`qualified` names what the call's function is; a user function's `device=` may be anything)."""
    found = []
    if is_method(node.func, "to"):
        positional = [arg for arg in node.args if arg.keyword is None and not arg.star]
        if positional:
            found.append(positional[0].value)
    name = qualified(node.func)
    if isinstance(node.func, cst.Attribute) and (name is None or name.startswith("torch.")):
        found += [arg.value for arg in node.args if arg.keyword is not None and arg.keyword.value == "device"]
    return found


class IntDeviceIndices(Rule):
    TRIGGER = Words(whole=INDEX_NAMES + INDEX_LIST_NAMES)
    NEEDS = (INT_NAMES,)

    @classmethod
    def fires_for(cls, target) -> bool:
        return not target.is_vendor

    @classmethod
    def file_words(cls, target) -> Words:
        # An int is a CUDA device in a file with CUDA code; `rank` alone is in a quarter of all files.
        return Words()

    def visit_Call(self, node: cst.Call) -> None:
        for value in device_arguments(node, self.qualified):
            if isinstance(value, cst.Subscript):
                self._item(value)
                continue
            name = dotted(value)
            if name is None or self.excluded(value) or self.qualified(value) is not None:
                continue  # not a plain value, or an imported name
            if name.rsplit(".", 1)[-1] not in INDEX_NAMES:
                continue  # the rule is shown only statements with these names (`device = 0`: dataflow reports)
            if name in self.fact(INT_NAMES).names:
                if value.lpar:
                    continue
                template = self.target.indexed_device
                self.replacements[value] = device = self.expression(template, index=value)
                self.changed("PL101", value, f"{name} (an int: a CUDA index) -> {code_of(device)}")
            else:
                self.report("PL412", value, f"{name} is given as a device: an int there means a CUDA device")

    def _item(self, value: cst.Subscript) -> None:
        """`device_ids[0]`: an int where the file makes `device_ids` a list of ints, else reported."""
        name = dotted(value.value)
        if name is None or name.rsplit(".", 1)[-1] not in INDEX_LIST_NAMES or self.excluded(value):
            return
        if name in self.fact(INT_NAMES).lists and len(value.slice) == 1 and isinstance(value.slice[0].slice, cst.Index):
            self.replacements[value] = device = self.expression(self.target.indexed_device, index=value)
            self.changed("PL101", value, f"{code_of(value)} (an int: a CUDA index) -> {code_of(device)}")
        else:
            self.report("PL412", value, f"{code_of(value)} is given as a device: an int there means a CUDA device")

    def leave_Name(self, original_node, updated_node):
        return self.replacements.get(original_node, updated_node)

    def leave_Attribute(self, original_node, updated_node):
        return self.replacements.get(original_node, updated_node)

    def leave_Subscript(self, original_node, updated_node):
        return self.replacements.get(original_node, updated_node)


class IntDeviceAssignments(FileRule):
    NEEDS = (INT_DEVICE_ASSIGNMENTS, INT_NAMES, CURRENT_DEVICES_HELD, USER_EXCLUSIONS)

    @classmethod
    def fires_for(cls, target) -> bool:
        return not target.is_vendor  # a vendor's plugin maps an int to its own device

    def check(self) -> None:
        excluded = self.fact(USER_EXCLUSIONS)
        for line, col, name in self.fact(INT_DEVICE_ASSIGNMENTS):
            # `device_id = int(os.environ["LOCAL_RANK"])`: IntDeviceIndices converts each use as a device
            if name.rsplit(".", 1)[-1] in INDEX_NAMES and name in self.fact(INT_NAMES).names:
                continue
            # `device = torch.cuda.current_device()` read only as a device: CurrentDeviceGiven converts it
            if line in self.fact(CURRENT_DEVICES_HELD):
                continue
            if line not in excluded:
                self.report_at("PL412", line, col, f"{name} holds an int and is given as a device: an int there "
                                                   "means a CUDA device")
