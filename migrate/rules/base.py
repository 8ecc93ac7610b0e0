"""What every rule shares: the target, the user's exclusions, resolved names, the facts about the whole
file it declares (`NEEDS`), and the record of changes and diagnostics with their positions in the input.

Two kinds: a `Rule` looks at the statements the engine shows it (a LibCST transformer); a `FileRule`
tells what it has to say from the file's facts alone (a chain that already dispatches, a program's own
fallback), once per file.
"""

from __future__ import annotations

import re
from typing import ClassVar, TypeVar

import libcst as cst

from portlayer.migrate.engine.context import FileContext, Requests
from portlayer.migrate.engine.dispatch import OwnHooksTransformer, own_hook
from portlayer.migrate.engine.facts import Fact
from portlayer.migrate.engine.locations import NodeLocations
from portlayer.migrate.engine.names import dotted
from portlayer.migrate.engine.printing import code_of
from portlayer.migrate.engine.scopes import Scope
from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.results import Change, Diagnostic
from portlayer.migrate.targets import Target

T = TypeVar("T")

# Nodes whose `name` is a name they bind, and nodes whose `target` is: what a bound name sits in.
_NAMING = (cst.Param, cst.FunctionDef, cst.ClassDef, cst.AsName, cst.NameItem, cst.MatchAs, cst.MatchStar)
_ASSIGNING = (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.Del)
_TARGET_PARTS = (cst.Tuple, cst.List, cst.Element, cst.StarredElement)


class BaseRule:
    """One concern of the migration, of either kind. `NEEDS`: the facts about the whole file the rule reads
    (`portlayer.migrate.engine.facts`), each read with `self.fact`."""

    NEEDS: ClassVar[tuple[Fact, ...]] = ()

    def __init__(self, context: FileContext, requests: Requests):
        super().__init__()
        self.context = context
        self.requests = requests
        self.target = context.target
        self.changes: list[Change] = []
        self.diagnostics: list[Diagnostic] = []

    @classmethod
    def fires_for(cls, target: Target) -> bool:
        """False when the rule never changes or reports anything on `target`."""
        return True

    def fact(self, fact: Fact[T]) -> T:
        """`fact` about this file, computed the first time a rule asks for it; only a declared one."""
        if fact not in self.NEEDS:
            raise TypeError(f"{type(self).__name__} reads {fact}, which its NEEDS does not declare")
        return self.context.facts[fact]


class FileRule(BaseRule):
    """A concern the file's facts answer alone, without a statement to look at: `check` runs once in
    every file that goes through the rules and has CUDA code for the target (the engine's file test)."""

    def check(self) -> None:
        raise NotImplementedError

    def report_at(self, code: str, line: int, col: int, message: str | None = None) -> None:
        self.diagnostics.append(Diagnostic.of(code, line, col, message))

    def changed_at(self, code: str, line: int, col: int, message: str) -> None:
        self.changes.append(Change(code, line, col, message))


class Rule(BaseRule, OwnHooksTransformer):
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

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "TRIGGER" in cls.__dict__:
            cls.trigger = cls.TRIGGER.pattern()
        for hook in ("visit_Module", "leave_Module"):
            if own_hook(cls, hook) is not None and not cls.LOOKS_ACROSS_STATEMENTS:
                raise TypeError(f"{cls.__name__}.{hook} runs only for a rule that LOOKS_ACROSS_STATEMENTS")

    @classmethod
    def file_words(cls, target: Target) -> Words:
        """The words that make a file worth reading for this rule on `target` (the engine's file test,
        `portlayer.migrate.engine.triggers`): TRIGGER, unless the rule matters only in a file that has
        CUDA code for another rule."""
        return cls.TRIGGER

    def __init__(self, context: FileContext, requests: Requests, locations: NodeLocations):
        super().__init__(context, requests)
        self.locations = locations  # of the tree the rule visits
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
            self.requests.released.update(self.context.module.by_name.get(name, ()))

    @property
    def torch(self) -> str:
        """The name `torch` is bound to in this module; records that `import torch` is needed if none."""
        alias = self.context.module.torch_alias
        if alias is None:
            self.requests.added.add("torch")
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
            self.requests.added.add(self.target.runtime_import)

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
        self.requests.defined[name] = code_of(self.expression(self.target.device_type))
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
