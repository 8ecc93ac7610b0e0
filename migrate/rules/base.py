"""What every rule shares: the target, the user's exclusions, resolved names, and the record of
changes and diagnostics with their positions in the input."""

from __future__ import annotations

import re
from typing import ClassVar

import libcst as cst
from libcst.metadata import (
    ParentNodeProvider,
    PositionProvider,
    QualifiedNameProvider,
    QualifiedNameSource,
)

from migrate.codes import CODES
from migrate.imports import ImportPlan
from migrate.model import Change, Diagnostic
from migrate.targets import Target

# `from torch.cuda import *` hides which names are torch's from the scope analysis: these modules'
# names are resolved by their spelling when nothing else in the scope binds them.
_STAR_MODULES = ("torch.cuda", "torch.cuda.amp")


def dotted(node: cst.CSTNode) -> str | None:
    """`a.b.c` for a chain of plain names and attributes, else None (calls, subscripts...)."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = dotted(node.value)
        return None if head is None else f"{head}.{node.attr.value}"
    return None


class Rule(cst.CSTTransformer):
    """One concern of the migration. Subclasses set TRIGGER (a regex: the rule can only fire on
    sources whose code, comments and docstrings aside, it matches; the engine's prefilter is the union
    over the rules that `fires_for` the target) and rewrite or report.

    A plain CSTTransformer run through a shared MetadataWrapper, rather than libcst's codemod
    commands: their matcher machinery and per-command metadata cost more than the rules themselves.
    """

    TRIGGER: ClassVar[str]
    trigger: ClassVar[re.Pattern]
    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider, ParentNodeProvider)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "TRIGGER" in cls.__dict__:
            cls.trigger = re.compile(cls.TRIGGER, re.IGNORECASE)

    @classmethod
    def fires_for(cls, target: Target) -> bool:
        """False when the rule never changes or reports anything on `target`."""
        return True

    def __init__(self, imports: ImportPlan, target: Target, excluded: frozenset[int]):
        super().__init__()
        self.imports = imports
        self.target = target
        self.excluded_lines = excluded
        self.changes: list[Change] = []
        self.diagnostics: list[Diagnostic] = []
        self._star_names: dict[str, str] = {}
        self._torch_alias: str | None = None
        # Original node -> its rewrite, filled top-down, applied on the way back up.
        self.replacements: dict[cst.CSTNode, cst.BaseExpression] = {}
        # Module-level imports by the name they bind: (module, imported object or None, alias or None).
        self._imports: dict[str, list[tuple[str, str | None, str | None]]] = {}

    # Import statements are the rules' input (aliases), never their output: no rule rewrites inside one.
    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    # -- module facts -------------------------------------------------------------------------------

    def visit_Module(self, node: cst.Module) -> None:
        self._torch_alias = None
        self._star_names = {}
        self._imports = {}
        for statement in node.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                self._record_import(small)
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        if dotted(alias.name) == "torch" and self._torch_alias is None:
                            self._torch_alias = alias.evaluated_alias or "torch"
                        elif alias.asname is None and (dotted(alias.name) or "").startswith("torch."):
                            self._torch_alias = self._torch_alias or "torch"
                elif isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar):
                    module = dotted(small.module) if small.module is not None else None
                    if module in _STAR_MODULES:
                        self._star_names[module] = module

    def _record_import(self, small: cst.BaseSmallStatement) -> None:
        if isinstance(small, cst.Import):
            for alias in small.names:
                module = dotted(alias.name) or ""
                asname = alias.evaluated_alias
                bound = asname or module.split(".")[0]
                self._imports.setdefault(bound, []).append((module, None, asname))
        elif isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None \
                and not isinstance(small.names, cst.ImportStar):
            module = dotted(small.module) or ""
            for alias in small.names:
                name = dotted(alias.name) or ""
                asname = alias.evaluated_alias
                self._imports.setdefault(asname or name, []).append((module, name, asname))

    def _release_imports(self, node: cst.CSTNode) -> None:
        """Ask for the imports `node` used to be removed, should the rewrite leave them unused."""
        for name in _free_names(node):
            self.imports.released.update(self._imports.get(name, ()))

    @property
    def torch(self) -> str:
        """The name `torch` is bound to in this module; records that `import torch` is needed if none."""
        if self._torch_alias is None:
            self.imports.added.add("torch")
            return "torch"
        return self._torch_alias

    # -- resolution ---------------------------------------------------------------------------------

    def qualified(self, node: cst.CSTNode) -> str | None:
        """The imported name `node` refers to (`torch.cuda.synchronize` for `th.cuda.synchronize` after
        `import torch as th`), or None for local names, shadowed names and anything not a plain chain."""
        if dotted(node) is None:
            return None
        names = self.get_metadata(QualifiedNameProvider, node, set())
        for name in names:
            if name.source is QualifiedNameSource.IMPORT:
                return name.name
        if names or self._is_attribute_name(node):
            return None
        head = node
        while isinstance(head, cst.Attribute):
            head = head.value
        if self.get_metadata(QualifiedNameProvider, head, set()):
            return None  # bound in the module: a local name
        name = dotted(node)
        if name.split(".")[0] == "torch":
            # A free `torch` (star-imported, or injected) is torch: the `import torch` the migration
            # adds for its own rewrites would bind it so, and the next run would then convert it.
            return name
        return self._from_star(name) if self._star_names else None

    def _is_attribute_name(self, node: cst.CSTNode) -> bool:
        """`b` in `a.b`, or a keyword's name: never a free name a star import could bind."""
        parent = self.parent(node)
        return (isinstance(parent, cst.Attribute) and parent.attr is node) or (
            isinstance(parent, cst.Arg) and parent.keyword is node)

    def _from_star(self, name: str) -> str | None:
        from migrate import cuda_api

        first = name.split(".")[0]
        if "torch.cuda.amp" in self._star_names and f"amp.{first}" in cuda_api.AMP_NAMES:
            return f"torch.cuda.amp.{name}"
        if "torch.cuda" in self._star_names and (
            first in cuda_api.PORTLAYER or first in cuda_api.DEVICE_MODULE or first in cuda_api.TENSOR_TYPES
            or first in cuda_api.GRAPHS or first in ("amp", "nvtx")
        ):
            return f"torch.cuda.{name}"
        return None

    def parent(self, node: cst.CSTNode) -> cst.CSTNode:
        return self.get_metadata(ParentNodeProvider, node)

    # -- positions, exclusions, records -------------------------------------------------------------

    def position(self, node: cst.CSTNode) -> tuple[int, int]:
        """1-based line and column, as editors and compilers print them (libcst counts columns from 0)."""
        start = self.get_metadata(PositionProvider, node).start
        return start.line, start.column + 1

    def excluded(self, node: cst.CSTNode) -> bool:
        return bool(self.excluded_lines) and self.position(node)[0] in self.excluded_lines

    def changed(self, code: str, node: cst.CSTNode, message: str, *, needs_runtime: bool = True) -> None:
        """Record a conversion of `node` (an original node): the imports it used may now be unused, and
        the rewritten code needs the target's runtime import unless `needs_runtime` is False."""
        line, col = self.position(node)
        self.changes.append(Change(code, line, col, message))
        self._release_imports(node)
        if needs_runtime and self.target.runtime_import is not None:
            self.imports.added.add(self.target.runtime_import)

    def report(self, code: str, node: cst.CSTNode, message: str | None = None) -> None:
        if self.excluded(node):
            return
        row = CODES[code]
        line, col = self.position(node)
        self.diagnostics.append(Diagnostic(code, line, col, message or row.title, row.hint, row.severity))

    # -- building code ------------------------------------------------------------------------------

    def expression(self, template: str, **parts: str | cst.BaseExpression) -> cst.BaseExpression:
        """Parse `template` with `{torch}` and any `{part}` filled in (nodes are rendered to code)."""
        values = {
            key: value if isinstance(value, str) else cst.Module([]).code_for_node(value)
            for key, value in parts.items()
        }
        if "{torch}" in template:
            values["torch"] = self.torch
        return cst.parse_expression(template.format(**values))

    @staticmethod
    def keyword(name: str, value: cst.BaseExpression) -> cst.Arg:
        """`name=value`, spaced as PEP 8 spaces keywords."""
        return cst.Arg(value, keyword=cst.Name(name),
                       equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))


def _free_names(node: cst.CSTNode) -> set[str]:
    """The names `node` reads (`th` and `x` in `th.cuda.f(x.y)`; not the attribute names)."""
    names: set[str] = set()

    class Collect(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            names.add(name.value)

        def visit_Attribute(self, attribute: cst.Attribute) -> bool:
            attribute.value.visit(self)
            return False

        def visit_Arg(self, arg: cst.Arg) -> bool:
            arg.value.visit(self)
            return False

    node.visit(Collect())
    return names


class ReferenceRule(Rule):
    """A rule about imported names (`torch.cuda.X`, `torch.backends.cudnn.X`): `reference` sees each
    outermost name or attribute chain and returns True to look inside it."""

    def reference(self, node: cst.Name | cst.Attribute) -> bool:
        raise NotImplementedError

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return self.reference(node)

    def visit_Name(self, node: cst.Name) -> bool:
        return self.reference(node)

    def leave_Attribute(self, original_node, updated_node):
        return self.replacements.get(original_node, updated_node)

    def leave_Name(self, original_node, updated_node):
        return self.replacements.get(original_node, updated_node)
