"""Which import a name read refers to: the scopes of a module and what each binds, built from CPython's
`ast` by `portlayer.migrate.engine.analysis`.

The rules ask this instead of LibCST's scope analysis, which costs seconds on a large module where
this costs milliseconds, and lets them look at a few statements instead of the whole module. The rules
follow Python's: a name bound anywhere in a function is local to all of it, `global` and `nonlocal`
redirect, a class body is invisible to the functions inside it, and a name bound by an import in a
scope is that import wherever that scope reads it, even if it is also assigned there.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import NamedTuple

Position = tuple[int, int]  # (1-based line, 0-based character column), as LibCST counts them


class Binding(NamedTuple):
    """What a name read refers to: `kind` is "import" (then `qualified` is what it imports: "torch.cuda"
    for `cuda` after `from torch import cuda`), "local" (bound otherwise in its scope) or "free" (bound
    nowhere: a builtin, a star import, a name injected at run time)."""

    kind: str
    qualified: str | None = None


FREE = Binding("free")
LOCAL = Binding("local")


@dataclass(eq=False)
class Scope:
    # "module" | "function" | "class" | "comprehension" | "annotation" (PEP 695 type parameters), or
    # "iterable": a piece of a scope's span read in another one (a comprehension's first iterable, a
    # generic function's defaults); its `parent` is that other scope.
    kind: str
    start: Position
    end: Position
    parent: Scope | None = None
    children: list[Scope] = field(default_factory=list)
    imports: dict[str, str] = field(default_factory=dict)
    bound: set[str] = field(default_factory=set)
    declared_global: set[str] = field(default_factory=set)
    declared_nonlocal: set[str] = field(default_factory=set)

    def child(self, kind: str, start: Position, end: Position) -> Scope:
        scope = Scope(kind, start, end, self)
        self.children.append(scope)
        return scope

    def bind(self, name: str) -> None:
        (self.parent if self.kind == "iterable" else self).bound.add(name)

    def bind_import(self, name: str, qualified: str) -> None:
        self.imports.setdefault(name, qualified)

    @property
    def function(self) -> Scope:
        """The scope a walrus in a comprehension binds in."""
        scope = self
        while scope.kind == "comprehension" and scope.parent is not None:
            scope = scope.parent
        return scope

    @property
    def module(self) -> Scope:
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope

    def resolve(self, name: str) -> Binding:
        """What `name`, read in this scope, refers to."""
        if self.kind == "iterable":
            return self.parent.resolve(name)
        scope: Scope | None = self
        own = True
        while scope is not None:
            if name in scope.declared_global:
                return scope.module._own(name) or FREE
            if name in scope.declared_nonlocal:
                scope, own = scope.parent, False
                continue
            if own or scope.kind != "class":  # a class body's names are not its methods' names
                found = scope._own(name)
                if found is not None:
                    return found
            # An annotation scope sees the class it is in (PEP 695), as that class's own code does.
            scope, own = scope.parent, own and scope.kind == "annotation"
        return FREE

    def _own(self, name: str) -> Binding | None:
        if name in self.imports:
            return Binding("import", self.imports[name])
        return LOCAL if name in self.bound else None

    def innermost(self, position: Position) -> Scope:
        """The innermost scope whose code contains `position` (this one if no child's does)."""
        scope = self
        while scope.children:
            # Children are in source order and do not overlap: the last one starting at or before.
            index = bisect_right(scope.children, position, key=lambda child: child.start) - 1
            if index < 0 or not (scope.children[index].start <= position < scope.children[index].end):
                break
            scope = scope.children[index]
        return scope
