"""Distributed: the collective backend (`"nccl"`, `Backend.NCCL`) and DistributedDataParallel's devices.

`"nccl"` is a backend when it is the first argument of `init_process_group`, a `backend=` or
`ddp_backend=` keyword (HF TrainingArguments), assigned to a name containing "backend", or compared
with one or with `get_backend()`; through `a if c else b` as for devices.
"""

from __future__ import annotations

import re

import libcst as cst

from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.base import Rule, code_of
from portlayer.migrate.rules.strings import StringNode, StringRoleRule, last_identifier

BACKEND = "collective backend"
_INIT = {"torch.distributed.init_process_group", "torch.distributed.distributed_c10d.init_process_group"}
_NCCL_ATTRIBUTES = {"torch.distributed.Backend.NCCL", "torch.distributed.distributed_c10d.Backend.NCCL"}
_DDP = {
    "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel",
    "torch.nn.DistributedDataParallel",
}


def names_a_backend(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.Call):
        return last_identifier(node.func) == "get_backend"
    name = last_identifier(node)
    return name is not None and "backend" in name.lower()


class CollectiveBackend(StringRoleRule):
    TRIGGER = Words(("nccl",))
    LITERAL = re.compile(r"nccl$")
    ROLE_WORD = "collective backend"
    CODE = "PL104"

    def visit_Call(self, node: cst.Call) -> None:
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in ("backend", "ddp_backend"):
                self.assign_role(arg.value, BACKEND)
        if self.qualified(node.func) in _INIT and node.args and node.args[0].keyword is None:
            self.assign_role(node.args[0].value, BACKEND)

    def role_of_name(self, target: cst.CSTNode) -> str | None:
        return BACKEND if names_a_backend(target) else None

    def visit_Comparison(self, node: cst.Comparison) -> None:
        operands = [node.left, *(target.comparator for target in node.comparisons)]
        if any(names_a_backend(operand) for operand in operands):
            for operand in operands:
                self.assign_role(operand, BACKEND)

    def rewrite(self, node: StringNode, role: str) -> cst.BaseExpression | None:
        if self.target.is_vendor:
            return self.vendor_literal(node, "nccl", self.target.vendor_dist_backend)
        return self.expression(self.target.dist_backend)

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        if self.qualified(original_node) not in _NCCL_ATTRIBUTES or self.excluded(original_node):
            return updated_node
        if self.target.is_vendor:
            replacement = cst.SimpleString(f'"{self.target.vendor_dist_backend}"')
        else:
            replacement = self.expression(self.target.dist_backend)
        self.changed("PL104", original_node, f"Backend.NCCL -> {code_of(replacement)}")
        return replacement


class DistributedDataParallelDevices(Rule):
    """`DDP(m, device_ids=[i], output_device=i)`, where the program may run on the cpu (which takes
    `device_ids=None`): neutral `DDP(m, device_ids=portlayer.ddp_device_ids(i))`, torch
    `DDP(m, device_ids=[i] if torch.accelerator.is_available() else None)`.

    DDP takes `output_device` to default to `device_ids[0]`, and requires None for cpu modules, so an
    `output_device` that repeats `device_ids` is dropped; any other is reported (PL407). The vendor
    targets keep `device_ids=[i]`: their program always has its device, and DDP takes its indices.
    """

    TRIGGER = Words(("DistributedDataParallel",))  # `DDP` is an alias imported under its name

    @classmethod
    def fires_for(cls, target) -> bool:
        return target.ddp_device_ids is not None

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        template = self.target.ddp_device_ids
        if template is None or self.qualified(original_node.func) not in _DDP:
            return updated_node
        if self.excluded(original_node):
            return updated_node
        args = list(updated_node.args)
        keywords = {arg.keyword.value: i for i, arg in enumerate(args) if arg.keyword is not None}
        positional = [i for i, arg in enumerate(args) if arg.keyword is None and not arg.star]
        if "device_ids" not in keywords and len(positional) >= 2:
            keywords["device_ids"] = positional[1]  # DistributedDataParallel(module, device_ids, …)
        if "device_ids" not in keywords:
            return updated_node
        ids_arg = args[keywords["device_ids"]]
        if isinstance(ids_arg.value, cst.List):
            if not ids_arg.value.elements:
                return updated_node
            elements = ids_arg.value.elements
            single = elements[0].value if len(elements) == 1 else None
        elif isinstance(ids_arg.value, (cst.Name, cst.Attribute)) and ids_arg.value.value != "None":
            single = None  # a list held in a variable (pytorch/examples distributed/ddp/example.py)
        else:
            return updated_node
        # neutral's `ddp_device_ids(i)` takes the index itself; torch's keeps the list as written.
        argument = single if single is not None and self.target.name == "neutral" else ids_arg.value
        args[keywords["device_ids"]] = ids_arg.with_changes(value=self.expression(template, ids=argument))
        if "output_device" in keywords:
            output = args[keywords["output_device"]].value
            if single is not None and code_of(output) == code_of(single):
                del args[keywords["output_device"]]
                if args:
                    args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            else:
                self.report("PL407", original_node.args[keywords["output_device"]])
        self.changed(
            "PL105",
            original_node,
            f"DistributedDataParallel device_ids -> {code_of(args[keywords['device_ids']].value)}",
        )
        return updated_node.with_changes(args=args)
