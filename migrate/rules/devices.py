"""Devices: `torch.device("cuda", i)`, `"cuda"` / `"cuda:0"` / `f"cuda:{rank}"` where used as a device
or device type, `.cuda(...)` and `.is_cuda`.

A literal is a device when it is: the argument of `torch.device(...)`; the first argument of `.to(...)`;
a `device=`, `map_location=`, `device_map=` keyword of any call; assigned to a name, attribute or
parameter whose name contains "device". It is a device type when it is a `device_type=` or `type=`
keyword, the first argument of `torch.autocast` / `torch.amp.autocast` / `torch.amp.GradScaler` /
`torch.get_device_module`, or compared with something named `type` or containing "device". Either way
through `a if c else b`, tuples in `in` tests, `"cuda:" + ...`, `"cuda:%d" % ...` and `"cuda:{}".format`.
"""

from __future__ import annotations

import re

import libcst as cst
from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.strings import StringNode, StringRoleRule, is_method, last_identifier

DEVICE, TYPE = "device", "device type"

_DEVICE_KEYWORDS = {
    "device": DEVICE,
    "map_location": DEVICE,
    "device_map": DEVICE,
    "device_type": TYPE,
    "type": TYPE,
}
_TYPE_FIRST_ARGUMENT = {
    "torch.autocast",
    "torch.amp.autocast",
    "torch.amp.autocast_mode.autocast",
    "torch.amp.GradScaler",
    "torch.amp.grad_scaler.GradScaler",
    "torch.get_device_module",
}
_TORCH_DEVICE = "torch.device"
_COMPARISONS = (cst.Equal, cst.NotEqual, cst.In, cst.NotIn)
# `.is_cuda` stays readable as a comparison where the surrounding code binds looser than `==`.
_LOOSE_PARENTS = (
    cst.Arg,
    cst.Assign,
    cst.AnnAssign,
    cst.Return,
    cst.If,
    cst.While,
    cst.Assert,
    cst.IfExp,
    cst.BooleanOperation,
    cst.Expr,
)


def names_a_device(node: cst.CSTNode) -> bool:
    name = last_identifier(node)
    return name is not None and "device" in name.lower()


class Devices(StringRoleRule):
    TRIGGER = Words(("cuda",))
    LITERAL = re.compile(r"cuda(:|$)")
    ROLE_WORD = "device"
    CODE = "PL101"

    def __init__(self, *args):
        super().__init__(*args)
        self.dot_cuda: set[cst.Call] = set()

    # -- contexts that give a literal its role -----------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        name = self.qualified(node.func)
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in _DEVICE_KEYWORDS:
                self.assign_role(arg.value, _DEVICE_KEYWORDS[arg.keyword.value])
        positional = [arg for arg in node.args if arg.keyword is None and not arg.star]
        if name == _TORCH_DEVICE:
            self._torch_device(node, positional)
        elif name in _TYPE_FIRST_ARGUMENT and positional:
            self.assign_role(positional[0].value, TYPE)
        elif is_method(node.func, "to") and positional:
            self.assign_role(positional[0].value, DEVICE)
        elif (
            is_method(node.func, "cuda")
            and not self._torch_module(node.func)
            and not self.excluded(node)
        ):
            self.dot_cuda.add(node)

    def role_of_name(self, target: cst.CSTNode) -> str | None:
        return DEVICE if names_a_device(target) else None

    def visit_Comparison(self, node: cst.Comparison) -> None:
        operands = [node.left, *(target.comparator for target in node.comparisons)]
        if not any(isinstance(target.operator, _COMPARISONS) for target in node.comparisons):
            return
        if any(names_a_device(operand) or last_identifier(operand) == "type" for operand in operands):
            for operand in operands:
                self.assign_role(operand, TYPE)

    # -- whole-call rewrites ------------------------------------------------------------------------

    def _torch_device(self, node: cst.Call, positional: list[cst.Arg]) -> None:
        keywords = {arg.keyword.value: arg.value for arg in node.args if arg.keyword is not None}
        kind = positional[0].value if positional else keywords.get("type")
        index = positional[1].value if len(positional) > 1 else keywords.get("index")
        if kind is None:
            return
        if self.target.is_vendor or self.excluded(node):
            self.assign_role(kind, DEVICE)
            return
        text = self.literal_text(kind) if isinstance(kind, (cst.SimpleString, cst.FormattedString)) else None
        if text is None:
            self.assign_role(kind, DEVICE)  # torch.device("cuda" if c else "cpu"), torch.device(name)
            return
        if index is None:
            index = self._literal_index(kind)
        elif text != "cuda":
            return  # torch.device("cuda:0", 1) is an error in the input: leave it to fail there
        expression = self._device(index)
        if expression is not None:
            self.replacements[node] = expression
            self.changed("PL101", node, f"torch.device(...) -> {cst.Module([]).code_for_node(expression)}")
        self.roles[kind] = "handled"

    def _dot_cuda(self, original: cst.Call, node: cst.Call) -> cst.Call:
        """`x.cuda(i, non_blocking=True)` -> `x.to(<device i>, non_blocking=True)` (`x.npu(...)` for vendors)."""
        func = node.func
        assert isinstance(func, cst.Attribute)
        if self.target.is_vendor:
            self.changed("PL101", original, f".cuda() -> .{self.target.vendor}()")
            return node.with_changes(func=func.with_changes(attr=cst.Name(self.target.vendor)))
        index, rest = None, []
        for arg in node.args:
            keyword = arg.keyword.value if arg.keyword is not None else None
            if (keyword is None and index is None and not arg.star) or keyword == "device":
                index = arg.value
            else:
                rest.append(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT))
        device = self._device(index)
        self.changed("PL101", original, f".cuda() -> .to({cst.Module([]).code_for_node(device)})")
        return node.with_changes(func=func.with_changes(attr=cst.Name("to")), args=[cst.Arg(device), *rest])

    def _torch_module(self, node: cst.Attribute) -> bool:
        receiver = self.qualified(node.value)
        return receiver is not None and receiver.split(".")[0] == "torch"

    def _literal_index(self, node: StringNode) -> cst.BaseExpression | None:
        if isinstance(node, cst.FormattedString):
            hole = node.parts[1]
            return hole.expression if isinstance(hole, cst.FormattedStringExpression) else None
        text = node.evaluated_value
        return cst.Integer(text.split(":")[1]) if ":" in text else None

    def _device(self, index: cst.BaseExpression | None) -> cst.BaseExpression:
        if index is None:
            return self.expression(self.target.device)
        return self.expression(self.target.indexed_device, index=index)

    # -- literal rewrites ---------------------------------------------------------------------------

    def rewrite(self, node: StringNode, role: str) -> cst.BaseExpression | None:
        if role == "handled":
            return node
        text = self.literal_text(node)
        if self.target.is_vendor:
            return self.vendor_literal(node, "cuda", self.target.vendor)
        if text == "cuda":
            return self.expression(self.target.device_type)
        if role == DEVICE and (
            re.fullmatch(r"cuda:\d+", text) or (text == "cuda:{}" and len(node.parts) == 2)
        ):
            hole = node.parts[1] if isinstance(node, cst.FormattedString) else None
            if hole is not None and (hole.conversion is not None or hole.format_spec is not None):
                return None
            return self._device(self._literal_index(node))
        return None

    # -- .is_cuda and replacements ------------------------------------------------------------------

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        if original_node.attr.value != "is_cuda" or self.excluded(original_node):
            return updated_node
        if self.is_assigned(original_node):
            # `Storage.is_cuda = …` (a plugin patching torch): a comparison cannot be assigned to.
            self.report("PL401", original_node, ".is_cuda is assigned here: left as it is")
            return updated_node
        if self.target.is_vendor:
            replacement = updated_node.with_changes(attr=cst.Name(f"is_{self.target.vendor}"))
        else:
            receiver = cst.Module([]).code_for_node(updated_node.value)
            replacement = self.expression(f"{receiver}.device.type == {self.target.device_type}")
            if not isinstance(self.parent(original_node), _LOOSE_PARENTS):
                replacement = replacement.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        self.changed("PL101", original_node, f".is_cuda -> {cst.Module([]).code_for_node(replacement)}")
        return replacement

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if original_node in self.dot_cuda:
            return self._dot_cuda(original_node, updated_node)
        return self.replacements.get(original_node, updated_node)
