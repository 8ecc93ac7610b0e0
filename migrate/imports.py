"""The imports a migration needs, applied once after every rule has run: the target's module added
once (after the module's leading imports), and imports the rules' edits left unused removed.

Only module-level imports that a rule released are candidates for removal, and a name counts as
used if it appears anywhere outside import statements (as a name or as a string, for `__all__`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

# An import as (module, imported name or None, alias or None): `from a.b import c as d` is
# ("a.b", "c", "d"), `import a.b` is ("a.b", None, None).
ImportSpec = tuple[str, "str | None", "str | None"]

# Added imports go in this order (the vendor plugin after torch).
_ORDER = ("torch", "portlayer", "torch_npu", "torch_musa")


@dataclass
class ImportPlan:
    added: set[str] = field(default_factory=set)
    released: set[ImportSpec] = field(default_factory=set)

    def apply(self, tree: cst.Module) -> tuple[cst.Module, list[str]]:
        """The module with its imports settled, and the modules whose import was added."""
        if self.released:
            tree = tree.visit(_RemoveUnused(self.released, _used_names(tree)))
        missing = [name for name in sorted(self.added, key=_rank) if name not in _plain_imports(tree)]
        return (_insert(tree, missing) if missing else tree), missing


def _rank(name: str) -> tuple[int, str]:
    return (_ORDER.index(name) if name in _ORDER else len(_ORDER), name)


def _dotted(node: cst.BaseExpression) -> str:
    return cst.Module([]).code_for_node(node)


def bound_name(spec: ImportSpec) -> str:
    module, obj, alias = spec
    return alias or obj or module.split(".")[0]


def _used_names(tree: cst.Module) -> set[str]:
    used: set[str] = set()

    class Collect(cst.CSTVisitor):
        def visit_Import(self, node: cst.Import) -> bool:
            return False

        def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
            return False

        def visit_Name(self, node: cst.Name) -> None:
            used.add(node.value)

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)  # `x` in `x.autocast`; the attribute's own name binds nothing
            return False

        def visit_Arg(self, node: cst.Arg) -> bool:
            node.value.visit(self)
            return False

        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            value = node.evaluated_value
            if isinstance(value, str):
                used.add(value.split(".")[0])

    tree.visit(Collect())
    return used


class _RemoveUnused(cst.CSTTransformer):
    def __init__(self, released: set[ImportSpec], used: set[str]):
        super().__init__()
        self.released, self.used = released, used
        self.depth = 0

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> bool:
        return False  # module-level imports only

    def _keep(self, spec: ImportSpec) -> bool:
        return spec not in self.released or bound_name(spec) in self.used

    def leave_Import(self, original_node, updated_node):
        names = [a for a in updated_node.names if self._keep((_dotted(a.name), None, a.evaluated_alias))]
        return self._with_names(updated_node, names)

    def leave_ImportFrom(self, original_node, updated_node):
        if isinstance(updated_node.names, cst.ImportStar) or updated_node.relative or updated_node.module is None:
            return updated_node
        module = _dotted(updated_node.module)
        names = [a for a in updated_node.names if self._keep((module, _dotted(a.name), a.evaluated_alias))]
        return self._with_names(updated_node, names)

    @staticmethod
    def _with_names(node, names):
        if not names:
            return cst.RemoveFromParent()
        if len(names) == len(node.names):
            return node
        names[-1] = names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        changes = {"names": names}
        if isinstance(node, cst.ImportFrom) and node.rpar is not None and len(names) == 1:
            changes.update(lpar=None, rpar=None)
        return node.with_changes(**changes)


def _plain_imports(tree: cst.Module) -> set[str]:
    """Modules imported as themselves at module level (`import torch_npu`, not `import x as y`)."""
    found = set()
    for statement in tree.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Import):
                    found.update(_dotted(a.name) for a in small.names if a.asname is None)
    return found


def _is_import_line(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body)


def _is_docstring(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and isinstance(
        statement.body[0], cst.Expr) and isinstance(statement.body[0].value, (cst.SimpleString,
                                                                              cst.ConcatenatedString))


def _insert(tree: cst.Module, modules: list[str]) -> cst.Module:
    body = list(tree.body)
    at = 1 if body and _is_docstring(body[0]) else 0
    position = at
    for index in range(at, len(body)):
        if _is_import_line(body[index]):
            position = index + 1
        else:
            break
    new = [cst.parse_statement(f"import {module}\n") for module in modules]
    if position < len(body) and position > 0 and not body[position].leading_lines:
        body[position] = body[position].with_changes(leading_lines=[cst.EmptyLine()])
    return tree.with_changes(body=[*body[:position], *new, *body[position:]])
