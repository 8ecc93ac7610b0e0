"""Parentheses for a question that replaces an expression: `a and b` where `x.is_cuda` or a comparison
stood binds looser than an atom, so it is enclosed wherever its parent needs tighter binding."""

from __future__ import annotations

import libcst as cst

# Where any expression stands without parentheses: a question replacing a comparison needs none there.
_STATEMENT_PARENTS = (cst.Arg, cst.Assign, cst.AnnAssign, cst.Return, cst.If, cst.While, cst.Assert, cst.Expr)
_ATOM = 9


def binding(node: cst.BaseExpression) -> int:
    """How tightly a question's spelling binds: `or` 1, `and` 2, `not` 3, a call or name _ATOM."""
    if isinstance(node, cst.BooleanOperation):
        return 2 if isinstance(node.operator, cst.And) else 1
    if isinstance(node, cst.UnaryOperation):
        return 3 if isinstance(node.operator, cst.Not) else _ATOM
    return _ATOM if isinstance(node, (cst.Call, cst.Name, cst.Attribute)) else 0


def binding_needed(parent: cst.CSTNode) -> int:
    """The least binding an operand of `parent` may have without parentheses."""
    if isinstance(parent, _STATEMENT_PARENTS):
        return 0
    if isinstance(parent, cst.BooleanOperation):
        return 2 if isinstance(parent.operator, cst.And) else 1
    if isinstance(parent, cst.IfExp):
        return 1
    if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
        return 3
    return _ATOM


def enclosed(replacement: cst.BaseExpression, original: cst.BaseExpression, parent: cst.CSTNode) -> cst.BaseExpression:
    """`replacement` for `original` (a child of `parent`), in parentheses where it binds looser than needed."""
    if original.lpar:
        return replacement.with_changes(lpar=original.lpar, rpar=original.rpar)
    if binding(replacement) >= binding_needed(parent):
        return replacement
    return replacement.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
