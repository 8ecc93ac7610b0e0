"""What the engine can tell the rules about the whole file, beyond the statements they are shown.

Each analysis is a `Fact`: a name and how to compute it from the file (`SourceFile`: its text, its lines
and CPython's tree of it). A rule declares the facts it reads (`NEEDS`), as a LibCST command declares
its METADATA_DEPENDENCIES, and reads one with `self.fact(FACT)`, which refuses a fact the rule did not
declare. A file's facts (`Facts`) are computed the first time a rule asks, once, and only for a rule
that declared them: a file none of whose rules needs the data flow is never walked for it. A fact may
build on others (`facts[OTHER]` inside its `compute`).

The facts live beside the analysis that computes them (`dataflow`, `guards`, `regions`), or beside the
rules that alone need them (a library table's fallbacks, `portlayer.migrate.rules.libraries`).
tests/migrate/test_rule_needs.py checks each rule's declaration against what its code reads.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from portlayer.migrate.targets import Target

T = TypeVar("T")


@dataclass(frozen=True)
class SourceFile:
    """The whole file, as every fact is computed from it."""

    text: str
    lines: Sequence[str]  # with their endings, as the parser counts them
    tree: ast.Module
    target: Target
    # The top-level packages the file imports (absolutely) in the statements the analysis read closely,
    # which include every import of a package whose name is a rule's word.
    packages: frozenset[str]


@dataclass(frozen=True, eq=False)  # one object per fact: compared and hashed by identity
class Fact(Generic[T]):
    name: str
    compute: Callable[[SourceFile, Facts], T]

    def __repr__(self) -> str:
        return f"Fact({self.name!r})"


class Facts:
    """The facts of one file, each computed the first time it is asked for."""

    def __init__(self, file: SourceFile):
        self.file = file
        self._known: dict[Fact, object] = {}

    def __getitem__(self, fact: Fact[T]) -> T:
        try:
            return self._known[fact]  # type: ignore[return-value]
        except KeyError:
            value = self._known[fact] = fact.compute(self.file, self)
            return value

