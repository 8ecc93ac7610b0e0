"""Rules that rewrite string literals only where the code uses them in a known role (a device, a
device type, a collective backend). Roles are found top-down from the contexts that give them; the
literals are rewritten on the way back up; a matching literal found in no role is reported (PL405).
"""

from __future__ import annotations

import re
from typing import ClassVar

import libcst as cst

from portlayer.migrate.rules.base import Rule, code_of

StringNode = cst.SimpleString | cst.FormattedString
# The role of a literal whose enclosing expression a rule rewrote whole: neither changed again nor reported.
HANDLED = "handled"


def string_value(node: cst.CSTNode) -> str | None:
    """The text of a plain (non-bytes, non-f) string literal, else None."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def is_docstring(parent: cst.CSTNode) -> bool:
    return isinstance(parent, cst.Expr)


def is_method(func: cst.BaseExpression, name: str) -> bool:
    """`func` is `<anything>.name`: a call of it calls a method `name`."""
    return isinstance(func, cst.Attribute) and func.attr.value == name


def last_identifier(node: cst.CSTNode) -> str | None:
    """`device` for `self.args.device`, `device_type` for `device_type`, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


class StringRoleRule(Rule):
    """Subclasses say which literals are theirs (LITERAL), which contexts give a role (visit_*
    calling `assign_role`), and how a literal is rewritten in a role (`rewrite`)."""

    LITERAL: ClassVar[re.Pattern]

    def __init__(self, *args):
        super().__init__(*args)
        self.roles: dict[cst.CSTNode, str] = {}

    def role_of_name(self, target: cst.CSTNode) -> str | None:
        """The role a value gets from the name it is bound to (`device = "cuda"`); None for no role."""
        return None

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            role = self.role_of_name(target.target)
            if role is not None:
                self.assign_role(node.value, role)
                return

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        role = self.role_of_name(node.target)
        if role is not None:
            self.assign_role(node.value, role)

    def visit_Param(self, node: cst.Param) -> None:
        role = self.role_of_name(node.name)
        if role is not None:
            self.assign_role(node.default, role)

    def assign_role(self, expression: cst.CSTNode | None, role: str) -> None:
        """Give `role` to the literals `expression` evaluates to (through `a if c else b`)."""
        if expression is None:
            return
        if isinstance(expression, cst.IfExp):
            self.assign_role(expression.body, role)
            self.assign_role(expression.orelse, role)
        elif isinstance(expression, (cst.Tuple, cst.List, cst.Set)):
            for element in expression.elements:
                self.assign_role(element.value, role)
        elif isinstance(expression, (cst.SimpleString, cst.FormattedString)):
            self.roles.setdefault(expression, role)
        elif isinstance(expression, cst.BinaryOperation) and isinstance(
            expression.operator, (cst.Add, cst.Modulo)
        ):
            self.assign_role(expression.left, role)  # "cuda:" + str(i), "cuda:%d" % i
        elif isinstance(expression, cst.Call) and is_method(expression.func, "format"):
            self.assign_role(expression.func.value, role)  # "cuda:{}".format(i)

    def literal_text(self, node: StringNode) -> str | None:
        """The literal's text if it is one of this rule's (an f-string as its text with `{}` holes)."""
        if isinstance(node, cst.SimpleString):
            text = string_value(node)
        else:
            text = "".join(
                part.value if isinstance(part, cst.FormattedStringText) else "{}" for part in node.parts
            )
        return text if text is not None and self.LITERAL.match(text) else None

    def rewrite(self, node: StringNode, role: str) -> cst.BaseExpression | None:
        raise NotImplementedError

    def vendor_literal(self, node: StringNode, old: str, new: str) -> cst.BaseExpression:
        """The same literal, quotes and prefix kept, with its leading `old` spelled `new`."""
        if isinstance(node, cst.SimpleString):
            quote_at = len(node.prefix) + len(node.quote)
            return node.with_changes(value=node.value[:quote_at] + new + node.value[quote_at + len(old) :])
        first = node.parts[0]
        assert isinstance(first, cst.FormattedStringText)
        return node.with_changes(
            parts=[first.with_changes(value=new + first.value[len(old) :]), *node.parts[1:]]
        )

    def _leave_string(self, original: StringNode, updated: cst.BaseExpression) -> cst.BaseExpression:
        if original in self.replacements:
            return self.replacements[original]
        text = self.literal_text(original)
        if text is None or self.excluded(original) or is_docstring(self.parent(original)):
            return updated
        role = self.roles.get(original)
        if role == HANDLED:
            return updated
        replacement = self.rewrite(original, role) if role is not None else None
        if replacement is None:
            self.report("PL405", original, f"{text!r} is not used in a position known to take a {self.ROLE_WORD}",
                        self.target.literal_hint())
            return updated
        self.changed(self.CODE, original, f"{text!r} -> {code_of(replacement)}")
        return replacement

    def leave_SimpleString(self, original_node, updated_node):
        return self._leave_string(original_node, updated_node)

    def leave_FormattedString(self, original_node, updated_node):
        return self._leave_string(original_node, updated_node)
