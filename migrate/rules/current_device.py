"""`torch.cuda.current_device()` given as a device: `torch.zeros(n, device=torch.cuda.current_device())`,
`.to(torch.cuda.current_device())`, `torch.device(torch.cuda.current_device())` (Megatron-LM's megatron/core
has about 160). The call answers an int, and torch makes an int the accelerator's device, which a host
without one lacks ("Cannot access accelerator device when none is available"): converted name by name, the
port placed those tensors nowhere on the cpu. Where the program may run on the cpu (neutral, torch) the call
becomes the target's current device, whole (PL101); vendor targets keep the int, which their plugins map
to their own device, as for `.to(i)`. Held by a name first (`device = torch.cuda.current_device()`), the
call is converted where the name is assigned once in its function and read only as a device there
(`CURRENT_DEVICES_HELD`); elsewhere the name stays an int, reported where it is assigned (PL412).
"""

from __future__ import annotations

import libcst as cst

from portlayer.migrate.engine.dataflow import CURRENT_DEVICES_HELD
from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.base import Rule, code_of
from portlayer.migrate.rules.int_devices import device_arguments

_CURRENT_DEVICE = "torch.cuda.current_device"
_TORCH_DEVICE = "torch.device"


class CurrentDeviceGiven(Rule):
    TRIGGER = Words(("current_device",))
    NEEDS = (CURRENT_DEVICES_HELD,)

    @classmethod
    def fires_for(cls, target) -> bool:
        return not target.is_vendor

    def visit_Call(self, node: cst.Call) -> None:
        given = device_arguments(node, self.qualified)
        if self.qualified(node.func) == _TORCH_DEVICE and len(node.args) == 1 and node.args[0].keyword is None:
            given.append(node.args[0].value)
        for value in given:
            if self._is_current_device(value) and not self.excluded(value):
                self.replacements[value] = device = self._device()
                self.changed("PL101", value, f"{code_of(value)} (an int: a CUDA index) -> {code_of(device)}")

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if self._is_current_device(value) and not self.excluded(value) \
                and self.position(node)[0] in self.fact(CURRENT_DEVICES_HELD):
            self.replacements[value] = device = self._device()
            self.changed("PL101", value, f"{code_of(value)}, read only as a device -> {code_of(device)}")

    def _is_current_device(self, value: cst.BaseExpression) -> bool:
        return isinstance(value, cst.Call) and not value.args and self.qualified(value.func) == _CURRENT_DEVICE

    def _device(self) -> cst.BaseExpression:
        if self.target.name == "neutral":
            return self.expression(self.target.device)
        # torch: the accelerator's current index, on the cpu the cpu (no index: torch.load cannot map to "cpu:0").
        return self.expression(self.target.indexed_device.replace("{index}", "{torch}.accelerator.current_device_index()"))

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        return self.replacements.get(original_node, updated_node)
