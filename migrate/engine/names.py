"""The name a chain of plain names and attributes spells (`a.b.c`), in either tree the engine reads:
CPython's `ast` (the whole file's analyses) and LibCST's (the statements the rules rewrite)."""

from __future__ import annotations

import ast

import libcst as cst


def dotted(node: ast.AST | cst.CSTNode) -> str | None:
    """`a.b.c` for a chain of plain names and attributes, else None (calls, subscripts...)."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, (cst.Attribute, ast.Attribute)):
        head = dotted(node.value)
        attribute = node.attr if isinstance(node, ast.Attribute) else node.attr.value
        return None if head is None else f"{head}.{attribute}"
    return None
