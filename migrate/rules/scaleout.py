"""Scale-out idioms in Python: DeepSpeed's process group and accelerator, and FSDP's `device_id`.

- `deepspeed.init_distributed(dist_backend="nccl")`: without the argument DeepSpeed takes the backend of
  the accelerator it runs on (`get_accelerator().communication_backend_name()`: hccl on npu, gloo or ccl on
  the cpu), which is also the one its engine places tensors for; so the literal is dropped (PL111) rather
  than renamed, on every target. Any other value is left to the collective-backend rule.
- `deepspeed.accelerator.get_accelerator()` already follows the accelerator DeepSpeed found: left as is,
  and said at info level (PL413). On a target DeepSpeed has no accelerator for (musa), the import of
  deepspeed is reported instead (PL415): get_accelerator() would not name the device there.
- FSDP1's `device_id=` (`FullyShardedDataParallel`, the composable `fully_shard` of torch < 2.4): FSDP
  turns an int into `torch.device(i)`, which is the accelerator's device and raises on a host without one.
  Where the program may run on the cpu (neutral, torch), `torch.cuda.current_device()` or a provable int
  becomes the target's device (PL112), anything else is reported (PL414). Vendor targets keep the int: it
  names their device, as for `.to(i)`. FSDP2 (`fully_shard`) takes its device from the mesh, whose
  `init_device_mesh("cuda", …)` the device rule converts.
"""

from __future__ import annotations

import libcst as cst

from portlayer.migrate.engine.dataflow import INT_NAMES
from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.base import Rule, code_of, dotted
from portlayer.migrate.rules.strings import string_value
from portlayer.strategies import deepspeed_devices as deepspeed_accelerators

_INIT_DISTRIBUTED = {"deepspeed.init_distributed", "deepspeed.comm.init_distributed",
                     "deepspeed.comm.comm.init_distributed"}
_GET_ACCELERATOR = {"deepspeed.get_accelerator", "deepspeed.accelerator.get_accelerator", "deepspeed.accelerator.real_accelerator.get_accelerator"}
_FSDP1 = {
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
    "torch.distributed._composable.fully_shard",
    "torch.distributed._composable.fully_shard.fully_shard",
}
_CURRENT_DEVICE = "torch.cuda.current_device"


class DeepSpeedCalls(Rule):
    TRIGGER = Words(("init_distributed", "get_accelerator"), whole=("deepspeed",))

    @classmethod
    def file_words(cls, target) -> Words:
        # `deepspeed` itself matters where a line imports it (PL415); elsewhere it names HuggingFace's
        # integration (`integrations.deepspeed`, `is_deepspeed_zero3_enabled`), which has nothing to rewrite.
        return Words(("init_distributed", "get_accelerator"), imported=("deepspeed",))

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            self._imported(alias.name)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if not node.relative and node.module is not None:
            self._imported(node.module)
        return False

    def _imported(self, module: cst.BaseExpression) -> None:
        if (dotted(module) or "").split(".")[0] == "deepspeed" and deepspeed_accelerators.lacks(self.target.vendor):
            self.report("PL415", module, f"DeepSpeed has no {self.target.vendor} accelerator of its own")

    def visit_Call(self, node: cst.Call) -> None:
        if self.qualified(node.func) in _GET_ACCELERATOR and not deepspeed_accelerators.lacks(self.target.vendor):
            self.report("PL413", node)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if self.qualified(original_node.func) not in _INIT_DISTRIBUTED or self.excluded(original_node):
            return updated_node
        args = list(updated_node.args)
        positional = [i for i, arg in enumerate(args) if arg.keyword is None and not arg.star]
        at = next((i for i, arg in enumerate(args) if arg.keyword and arg.keyword.value == "dist_backend"),
                  positional[0] if positional else None)
        if at is None or string_value(args[at].value) != "nccl":
            return updated_node
        if args[at].keyword is None and len(positional) > 1:
            args[at] = args[at].with_changes(value=cst.Name("None"))  # later positionals keep their places
        else:
            del args[at]
            if args:
                args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        self.changed("PL111", original_node.args[at], '"nccl" dropped: DeepSpeed takes its accelerator\'s backend',
                     needs_runtime=False)
        return updated_node.with_changes(args=args)


class FsdpDeviceId(Rule):
    TRIGGER = Words(("FullyShardedDataParallel", "fully_shard"))
    NEEDS = (INT_NAMES,)

    @classmethod
    def fires_for(cls, target) -> bool:
        return not target.is_vendor

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if self.qualified(original_node.func) not in _FSDP1 or self.excluded(original_node):
            return updated_node
        args = list(updated_node.args)
        at = next((i for i, arg in enumerate(args) if arg.keyword and arg.keyword.value == "device_id"), None)
        if at is None:
            return updated_node
        value = original_node.args[at].value
        device = self._device(value)
        if device is None:
            if not isinstance(value, cst.Name) or value.value != "None":
                self.report("PL414", value, f"device_id={code_of(value)}: an int there means the accelerator's "
                                            "device, which a host without one lacks")
            return updated_node
        args[at] = args[at].with_changes(value=device)
        self.changed("PL112", value, f"device_id={code_of(value)} -> {code_of(device)}")
        return updated_node.with_changes(args=args)

    def _device(self, value: cst.BaseExpression) -> cst.BaseExpression | None:
        """The target's device for FSDP's `device_id` value, or None where it is not provably an index."""
        if isinstance(value, cst.Call) and not value.args and self.qualified(value.func) == _CURRENT_DEVICE:
            if self.target.name == "neutral":
                return self.expression(self.target.device)
            index = "{torch}.accelerator.current_device_index()"
            return self.expression(self.target.indexed_device.replace("{index}", index))
        name = dotted(value)
        provable = (name is not None and name in self.fact(INT_NAMES).names) or (
            isinstance(value, cst.Call) and dotted(value.func) == "int")
        return self.expression(self.target.indexed_device, index=value) if provable else None
