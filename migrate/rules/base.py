"""What every rule shares: the target, the user's exclusions, resolved names, and the record of
changes and diagnostics with their positions in the input."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import libcst as cst

from portlayer.migrate.engine.analysis import ModuleImports
from portlayer.migrate.engine.dispatch import OwnHooksTransformer, own_hook
from portlayer.migrate.engine.imports import ImportPlan
from portlayer.migrate.engine.locations import NodeLocations
from portlayer.migrate.engine.printing import code_of
from portlayer.migrate.engine.scopes import Scope
from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.results import Change, Diagnostic
from portlayer.migrate.targets import Target

# Nodes whose `name` is a name they bind, and nodes whose `target` is: what a bound name sits in.
_NAMING = (cst.Param, cst.FunctionDef, cst.ClassDef, cst.AsName, cst.NameItem, cst.MatchAs, cst.MatchStar)
_ASSIGNING = (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.Del)
_TARGET_PARTS = (cst.Tuple, cst.List, cst.Element, cst.StarredElement)


def dotted(node: cst.CSTNode) -> str | None:
    """`a.b.c` for a chain of plain names and attributes, else None (calls, subscripts...)."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = dotted(node.value)
        return None if head is None else f"{head}.{node.attr.value}"
    return None


@dataclass
class FileContext:
    """What the rules know of the whole file while they look at some of its statements."""

    imports: ImportPlan
    target: Target
    excluded_lines: frozenset[int]
    module: ModuleImports
    scopes: Scope
    file_line: Callable[[int], int | None]  # a line of the code the rules see -> the file's
    # The file's line of an optional import (try/except ImportError, under an `if`) -> why it is optional.
    optional_imports: Mapping[int, str] = field(default_factory=dict)
    # One step of data flow (`portlayer.migrate.engine.dataflow`): names that hold an int device index, and the
    # file's lines of `name = "cuda..."` whose name is read only as a device.
    int_names: frozenset[str] = frozenset()
    device_string_lines: frozenset[int] = frozenset()
    # The lines of each `try: import <CUDA-only library> except ImportError: <fallback>` that gives way to
    # its fallback (`portlayer.migrate.engine.program_fallbacks`), and the names whose use the program's own
    # fallback or check decides (bound there, or by an import under an `if`): no rule rewrites their uses.
    fallback_lines: frozenset[int] = frozenset()
    left_to_program: frozenset[str] = frozenset()
    # Names bound by CUDA-only library imports whose every use a rule converted (`library_calls`): the
    # import goes with the rewrite, so it is not reported.
    converted_names: set[str] = field(default_factory=set)
    int_lists: frozenset[str] = frozenset()  # names that hold a list of ints (`list(range(…))`)


class Rule(OwnHooksTransformer):
    """One concern of the migration. Subclasses set TRIGGER (the words the rule can fire on: it is only
    shown statements whose code, comments and docstrings aside, has one, or reads a name an import with
    one binds; the engine's prefilter is the union over the rules that `fires_for` the target) and
    rewrite or report.

    A rule sees only the statements `portlayer.migrate.engine.analysis` picked, as one module (`portlayer.migrate.engine.snippets`):
    names are resolved by the file's scopes and positions are the file's. A plain CSTTransformer (that
    calls only the hooks a rule defines), rather than libcst's codemod commands: their matcher machinery
    and per-command metadata cost more than the rules themselves.
    """

    TRIGGER: ClassVar[Words]
    trigger: ClassVar[re.Pattern]
    # True for a rule that must see every statement shown for the file, not only those with its words,
    # and the module's own hooks (`leave_Module`): one that counts a name's uses across statements.
    LOOKS_ACROSS_STATEMENTS: ClassVar[bool] = False
    locations: NodeLocations  # of the tree the rule visits, set by the engine

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "TRIGGER" in cls.__dict__:
            cls.trigger = cls.TRIGGER.pattern()
        for hook in ("visit_Module", "leave_Module"):
            if own_hook(cls, hook) is not None and not cls.LOOKS_ACROSS_STATEMENTS:
                raise TypeError(f"{cls.__name__}.{hook} runs only for a rule that LOOKS_ACROSS_STATEMENTS")

    @classmethod
    def fires_for(cls, target: Target) -> bool:
        """False when the rule never changes or reports anything on `target`."""
        return True

    @classmethod
    def file_words(cls, target: Target) -> Words:
        """The words that make a file worth reading for this rule on `target` (the engine's file test,
        `portlayer.migrate.engine.triggers`): TRIGGER, unless the rule matters only in a file that has
        CUDA code for another rule."""
        return cls.TRIGGER

    def __init__(self, context: FileContext):
        super().__init__()
        self.context = context
        self.imports = context.imports
        self.target = context.target
        self.changes: list[Change] = []
        self.diagnostics: list[Diagnostic] = []
        # Original node -> its rewrite, filled top-down, applied on the way back up.
        self.replacements: dict[cst.CSTNode, cst.BaseExpression] = {}

    # Import statements are the rules' input (aliases), never their output: no rule rewrites inside one.
    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def _release_imports(self, node: cst.CSTNode) -> None:
        """Ask for the imports `node` used to be removed, should the rewrite leave them unused."""
        for name in _free_names(node):
            self.imports.released.update(self.context.module.by_name.get(name, ()))

    @property
    def torch(self) -> str:
        """The name `torch` is bound to in this module; records that `import torch` is needed if none."""
        alias = self.context.module.torch_alias
        if alias is None:
            self.imports.added.add("torch")
            return "torch"
        return alias

    # -- resolution ---------------------------------------------------------------------------------

    def qualified(self, node: cst.CSTNode) -> str | None:
        """The imported name `node` refers to (`torch.cuda.synchronize` for `th.cuda.synchronize` after
        `import torch as th`), or None for local names, shadowed names and anything not a plain chain."""
        # The same for every rule until one changes the tree; most rules ask about every reference.
        known = self.locations.referents
        if node not in known:
            known[node] = self._referent(node)
        return known[node]

    def _referent(self, node: cst.CSTNode) -> str | None:
        name = dotted(node)
        if name is None or self._is_attribute_name(node) or self._is_bound_here(node):
            return None
        head = node
        while isinstance(head, cst.Attribute):
            head = head.value
        line, column = self.position(head)
        first, _, rest = name.partition(".")
        binding = self.context.scopes.innermost((line, column - 1)).resolve(first)
        if binding.kind == "import":
            return f"{binding.qualified}.{rest}" if rest else binding.qualified
        if binding.kind == "local":
            return None
        if first == "torch":
            # A free `torch` (star-imported, or injected) is torch: the `import torch` the migration
            # adds for its own rewrites would bind it so, and the next run would then convert it.
            return name
        return self._from_star(name) if self.context.module.star_modules else None

    def _is_attribute_name(self, node: cst.CSTNode) -> bool:
        """`b` in `a.b`, or a keyword's name: never a name that refers to anything by itself."""
        parent = self.parent(node)
        return (isinstance(parent, cst.Attribute) and parent.attr is node) or (
            isinstance(parent, cst.Arg) and parent.keyword is node)

    def _is_bound_here(self, node: cst.CSTNode) -> bool:
        """A name being bound (a parameter, a def, an `as` name, an assignment target), not read."""
        if not isinstance(node, cst.Name):
            return False
        parent = self.parent(node)
        if isinstance(parent, _NAMING) and getattr(parent, "name", None) is node:
            return True
        return self.is_assigned(node)

    def is_assigned(self, node: cst.CSTNode) -> bool:
        """`node` is (part of) an assignment, `for`, walrus or `del` target: written, not read."""
        child, parent = node, self.parent(node)
        while isinstance(parent, _TARGET_PARTS):
            child, parent = parent, self.parent(parent)
        return isinstance(parent, _ASSIGNING) and getattr(parent, "target", None) is child

    def _from_star(self, name: str) -> str | None:
        from portlayer.migrate import cuda_api

        star_modules = self.context.module.star_modules
        first = name.split(".")[0]
        if "torch.cuda.amp" in star_modules and f"amp.{first}" in cuda_api.AMP_NAMES:
            return f"torch.cuda.amp.{name}"
        if "torch.cuda" in star_modules and (
            first in cuda_api.PORTLAYER or first in cuda_api.DEVICE_MODULE or first in cuda_api.TENSOR_TYPES
            or first in cuda_api.GRAPHS or first in ("amp", "nvtx")
        ):
            return f"torch.cuda.{name}"
        return None

    def parent(self, node: cst.CSTNode) -> cst.CSTNode:
        return self.locations.parent(node)

    # -- positions, exclusions, records -------------------------------------------------------------

    def position(self, node: cst.CSTNode) -> tuple[int, int]:
        """The file's 1-based line and column, as editors and compilers print them (libcst counts
        columns from 0)."""
        start = self.locations.start(node)
        return self.context.file_line(start.line) or 0, start.column + 1

    def excluded(self, node: cst.CSTNode) -> bool:
        excluded = self.context.excluded_lines
        return (bool(excluded) and not excluded.isdisjoint(self.locations.file_lines(node))
                and self.position(node)[0] in excluded)

    def changed(self, code: str, node: cst.CSTNode, message: str, *, needs_runtime: bool = True) -> None:
        """Record a conversion of `node` (an original node): the imports it used may now be unused, and
        the rewritten code needs the target's runtime import unless `needs_runtime` is False."""
        line, col = self.position(node)
        self.changes.append(Change(code, line, col, message))
        self._release_imports(node)
        if needs_runtime and self.target.runtime_import is not None:
            self.imports.added.add(self.target.runtime_import)

    def report(self, code: str, node: cst.CSTNode, message: str | None = None, hint: str | None = None) -> None:
        if self.excluded(node):
            return
        self.diagnostics.append(Diagnostic.of(code, *self.position(node), message, hint))

    # -- building code ------------------------------------------------------------------------------

    def device_type(self) -> cst.BaseExpression:
        """The target's device type: where the target names it (`device_type_name`) and the file binds that
        name nowhere, the name, defined once below the imports; else the expression itself."""
        name = self.target.device_type_name
        if name is None or self.context.module.torch_alias is None or _binds(self.context.scopes, name):
            return self.expression(self.target.device_type)
        self.imports.defined[name] = code_of(self.expression(self.target.device_type))
        return cst.Name(name)


    def expression(self, template: str, **parts: str | cst.BaseExpression) -> cst.BaseExpression:
        """Parse `template` with `{torch}` and any `{part}` filled in (nodes are rendered to code)."""
        values = {
            key: value if isinstance(value, str) else code_of(value)
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


def _binds(scope: Scope, name: str) -> bool:
    """`name` is bound in `scope` or in a scope inside it."""
    return name in scope.bound or any(_binds(child, name) for child in scope.children)
