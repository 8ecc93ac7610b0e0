"""Devices: `torch.device("cuda", i)`, `"cuda"` / `"cuda:0"` / `f"cuda:{rank}"` where used as a device
or device type, `.cuda(...)`, `.is_cuda`, and the questions "is this the accelerator?".

A literal is a device when it is: the argument of `torch.device(...)`; the first argument of `.to(...)`;
a `device=`, `map_location=`, `device_map=` keyword of any call; assigned to a name, attribute or
parameter whose name contains "device". It is a device type when it is a `device_type=` or `type=`
keyword, the first argument of `torch.autocast` / `torch.amp.autocast` / `torch.amp.GradScaler` /
`torch.get_device_module`, or compared with something named `type` or containing "device". Either way
through `a if c else b`, tuples in `in` tests, `"cuda:" + ...`, `"cuda:%d" % ...` and `"cuda:{}".format`.

Values keep their type: a device string bound to a name or passed to user code stays a string
(`str(portlayer.device(rank))`); torch's own device arguments get a `torch.device`. A comparison with
`"cuda"` (`device_type == "cuda"`, `"cuda" in device`, `x.is_cuda`) is a question, not a placement: it
becomes the target's "is this the accelerator?", which answers no where there is none.
"""

from __future__ import annotations

import re

import libcst as cst

from portlayer.migrate.engine.dataflow import DEVICE_STRINGS
from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.base import code_of, dotted
from portlayer.migrate.rules.precedence import enclosed
from portlayer.migrate.rules.strings import (
    HANDLED,
    StringNode,
    StringRoleRule,
    is_method,
    last_identifier,
    string_value,
)

# DEVICE: consumed by torch (a torch.device will do); DEVICE_STRING: a value the program keeps (a str stays one).
DEVICE, DEVICE_STRING, TYPE = "device", "device string", "device type"

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
    # FSDP2 and DTensor take their device from the mesh.
    "torch.distributed.device_mesh.init_device_mesh",
    "torch.distributed.init_device_mesh",
}
_TORCH_DEVICE = "torch.device"
_COMPARISONS = (cst.Equal, cst.NotEqual, cst.In, cst.NotIn)


def names_a_device(node: cst.CSTNode) -> bool:
    name = last_identifier(node)
    return name is not None and "device" in name.lower()


def _is_cuda(node: cst.CSTNode) -> bool:
    return string_value(node) == "cuda"


def _stringified(node: cst.CSTNode) -> cst.CSTNode | None:
    """`x` for `str(x)`, else None."""
    if (isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "str"
            and len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star):
        return node.args[0].value
    return None


def _asks_about_a_device(node: cst.CSTNode) -> bool:
    """What a comparison with "cuda" asks about: something named like a device or a type, or its str()."""
    inner = _stringified(node)
    node = inner if inner is not None else node
    return names_a_device(node) or last_identifier(node) == "type"


class Devices(StringRoleRule):
    TRIGGER = Words(("cuda",))
    LITERAL = re.compile(r"cuda(:|$)")
    ROLE_WORD = "device"
    CODE = "PL101"
    NEEDS = (DEVICE_STRINGS,)

    def __init__(self, *args):
        super().__init__(*args)
        self.dot_cuda: set[cst.Call] = set()

    # -- contexts that give a literal its role -----------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        name = self.qualified(node.func)
        # torch's calls and methods take a torch.device for a device string; user code may not.
        takes_device = isinstance(node.func, cst.Attribute) and (name is None or name.startswith("torch."))
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in _DEVICE_KEYWORDS:
                role = _DEVICE_KEYWORDS[arg.keyword.value]
                if role == DEVICE and arg.keyword.value == "device" and not takes_device:
                    role = DEVICE_STRING
                self.assign_role(arg.value, role)
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
        return DEVICE_STRING if names_a_device(target) else None

    def visit_Assign(self, node: cst.Assign) -> None:
        super().visit_Assign(node)
        # `loc = f"cuda:{i}"` read only as a device in its function (portlayer.migrate.engine.dataflow).
        device_strings = self.fact(DEVICE_STRINGS)
        if device_strings and self.position(node)[0] in device_strings:
            self.assign_role(node.value, DEVICE_STRING)

    def assign_role(self, expression: cst.CSTNode | None, role: str) -> None:
        composite = self._composite(expression) if expression is not None else None
        if composite is None or self.target.is_vendor or role == TYPE:
            super().assign_role(expression, role)
            return
        literal, index = composite
        self.roles[literal] = HANDLED
        if self.excluded(expression):
            return
        device = self._device(index)
        if role != DEVICE:
            device = self.expression("str({device})", device=device)
        self.replacements[expression] = device
        self.changed("PL101", expression, f"{code_of(expression)} -> "
                                          f"{code_of(device)}")

    @staticmethod
    def _composite(node: cst.CSTNode) -> tuple[cst.SimpleString, cst.BaseExpression] | None:
        """The literal and the index of a device string built at run time: `"cuda:{}".format(i)`,
        `"cuda:%d" % i`, `"cuda:" + str(i)`; None for anything else."""
        if isinstance(node, cst.Call) and is_method(node.func, "format"):
            literal = node.func.value
            if (string_value(literal) == "cuda:{}" and len(node.args) == 1 and node.args[0].keyword is None
                    and not node.args[0].star):
                return literal, node.args[0].value
        elif isinstance(node, cst.BinaryOperation):
            literal, text = node.left, string_value(node.left)
            if isinstance(node.operator, cst.Modulo) and text in ("cuda:%d", "cuda:%s", "cuda:%i") and not (
                    isinstance(node.right, cst.Tuple)):
                return literal, node.right
            index = _stringified(node.right)
            if isinstance(node.operator, cst.Add) and text == "cuda:" and index is not None:
                return literal, index
        return None

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if not self.target.is_vendor and self._question(node):
            return
        operands = [node.left, *(target.comparator for target in node.comparisons)]
        if not any(isinstance(target.operator, _COMPARISONS) for target in node.comparisons):
            return
        if any(names_a_device(operand) or last_identifier(operand) == "type" for operand in operands):
            for operand in operands:
                self.assign_role(operand, TYPE)

    # -- questions: "is this the accelerator?" ------------------------------------------------------

    def _question(self, node: cst.Comparison) -> bool:
        """`x == "cuda"`, `"cuda" != x`, `"cuda" in x`, `x in ("cuda", ...)` about a device or type: the
        target's question replaces the comparison (no on a host without an accelerator)."""
        if len(node.comparisons) != 1 or self.excluded(node):
            return False
        left, (comparison,) = node.left, node.comparisons
        right, operator = comparison.comparator, comparison.operator
        negate = isinstance(operator, (cst.NotEqual, cst.NotIn))
        if isinstance(operator, (cst.Equal, cst.NotEqual)):
            literal, value = (left, right) if _is_cuda(left) else (right, left)
            if not _is_cuda(literal) or not _asks_about_a_device(value):
                return False
            question, handled = self._ask(self.target.question, value, negate), [literal]
        elif isinstance(operator, (cst.In, cst.NotIn)) and _is_cuda(left):
            if not _asks_about_a_device(right):
                return False
            question, handled = self._ask(self.target.question_in, right, negate), [left]
        elif isinstance(operator, (cst.In, cst.NotIn)) and isinstance(right, (cst.Tuple, cst.List, cst.Set)):
            handled = [e.value for e in right.elements if _is_cuda(e.value)]
            rest = [e for e in right.elements if not _is_cuda(e.value)]
            # The value is read once more for the other members: only a plain name or attribute chain.
            if not handled or not _asks_about_a_device(left) or dotted(left) is None or any(
                    isinstance(e, cst.StarredElement) for e in rest):
                return False
            code = self._ask(self.target.question, left, negate)
            if rest:
                members = code_of(right.with_changes(elements=[
                    e.with_changes(comma=cst.MaybeSentinel.DEFAULT) for e in rest]))
                members = members.replace("{", "{{").replace("}", "}}")
                code = (f"{code} and {dotted(left)} not in {members}" if negate
                        else f"{code} or {dotted(left)} in {members}")
            question = code
        else:
            return False
        for literal in handled:
            self.roles[literal] = HANDLED
        self.replacements[node] = replacement = self._enclosed(self.expression(question), node)
        self.changed("PL101", node, f"{code_of(node).strip()} -> "
                                    f"{code_of(replacement)}")
        return True

    @staticmethod
    def _ask(template: str, value: cst.BaseExpression, negate: bool) -> str:
        asked = template.replace("{value}", code_of(value).replace("{", "{{").replace("}", "}}"))
        if not negate:
            return asked
        return f"not ({asked})" if " and " in asked else f"not {asked}"

    def _enclosed(self, replacement: cst.BaseExpression, original: cst.BaseExpression) -> cst.BaseExpression:
        """`replacement` in parentheses where it binds looser than what it replaces needs."""
        return enclosed(replacement, original, self.parent(original))

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
        composite = self._composite(kind)
        if composite is not None and index is None:
            kind, index = composite
        text = self.literal_text(kind) if isinstance(kind, (cst.SimpleString, cst.FormattedString)) else None
        if composite is not None and text is not None:
            text = "cuda"  # the index came from the composite
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
            self.changed("PL101", node, f"torch.device(...) -> {code_of(expression)}")
        self.roles[kind] = HANDLED

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
        self.changed("PL101", original, f".cuda() -> .to({code_of(device)})")
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
        text = self.literal_text(node)
        if self.target.is_vendor:
            return self.vendor_literal(node, "cuda", self.target.vendor)
        if text == "cuda":
            return self.device_type()
        if role in (DEVICE, DEVICE_STRING) and (
            re.fullmatch(r"cuda:\d+", text)
            or (text == "cuda:{}" and isinstance(node, cst.FormattedString) and len(node.parts) == 2)
        ):
            hole = node.parts[1] if isinstance(node, cst.FormattedString) else None
            if hole is not None and (hole.conversion is not None or hole.format_spec is not None):
                return None
            device = self._device(self._literal_index(node))
            return device if role == DEVICE else self.expression("str({device})", device=device)
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
            asked = self._ask(self.target.question_tensor, updated_node.value, negate=False)
            replacement = self._enclosed(self.expression(asked), original_node)
        self.changed("PL101", original_node, f".is_cuda -> {code_of(replacement)}")
        return replacement

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if original_node in self.dot_cuda:
            return self._dot_cuda(original_node, updated_node)
        return self.replacements.get(original_node, updated_node)

    def leave_BinaryOperation(self, original_node, updated_node) -> cst.BaseExpression:
        if original_node in self.replacements:
            return self.replacements[original_node]
        return self._placement_count(original_node, updated_node)

    def _placement_count(self, original: cst.BinaryOperation, node: cst.BinaryOperation) -> cst.BaseExpression:
        """`rank % <device_count()>` picks a device: at least 1 there, where the count of accelerators is 0
        on the cpu (the API rule has already converted `torch.cuda.device_count()`). `<device_count()> //
        local_world_size` is the devices of one rank (pytorch/examples distributed/ddp/example.py): at
        least 1, or the rank gets an empty list of devices."""
        if (self.target.is_vendor or not isinstance(node.operator, (cst.Modulo, cst.FloorDivide))
                or self.excluded(original)):
            return node
        if self._device_count(node.right):
            counted = code_of(node.right.func)
            self.changed("PL101", original, f"% {counted}() -> % max({counted}(), 1): a device index on the cpu too",
                         needs_runtime=False)
            return node.with_changes(right=_at_least_one(node.right))
        if isinstance(node.operator, cst.FloorDivide) and self._device_count(node.left) and not self._bounded(original):
            counted = code_of(node.left.func)
            self.changed("PL101", original, f"{counted}() // n -> max({counted}() // n, 1): a device per rank on the "
                                            "cpu too", needs_runtime=False)
            return _at_least_one(node)
        return node

    def _bounded(self, node: cst.BinaryOperation) -> bool:
        """`node` is already the first argument of `max(…, 1)` (a second run)."""
        call = self.parent(self.parent(node))
        return isinstance(call, cst.Call) and code_of(call.func) == "max"

    def _device_count(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, cst.Call) and not node.args and code_of(node.func) in (
            "portlayer.device_count", f"{self.context.module.torch_alias or 'torch'}.accelerator.device_count")

    def leave_Comparison(self, original_node, updated_node) -> cst.BaseExpression:
        return self.replacements.get(original_node, updated_node)


def _at_least_one(count: cst.BaseExpression) -> cst.Call:
    """`max(count, 1)`."""
    return cst.Call(cst.Name("max"), [cst.Arg(count.with_changes(lpar=[], rpar=[]),
                                              comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                                      cst.Arg(cst.Integer("1"))])
