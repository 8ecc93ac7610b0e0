"""The engine's name resolution (`engine.scopes`, built from CPython's ast) against LibCST's own
(`QualifiedNameProvider`), name read by name read, on the golden inputs and on generated programs.

Where both tools say something definite they must agree:
- LibCST: an absolute import only (one qualified name) -> ours: that import;
- LibCST: a relative import only -> ours: a local name (the engine never follows relative imports);
- LibCST: assignments only -> ours: local; LibCST: builtins only -> ours: free (bound nowhere).
A read LibCST resolves both to an import and to an assignment in the same scope is skipped: the engine
takes the import, on purpose (docstring of `engine.scopes`); so is a read LibCST leaves unresolved.
"""

from __future__ import annotations

import ast
from pathlib import Path

import hypothesmith
import libcst as cst
import pytest
from hypothesis import HealthCheck, assume, given, settings
from libcst.metadata import (
    ExpressionContext,
    ExpressionContextProvider,
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
    QualifiedNameProvider,
    QualifiedNameSource,
)

from portlayer.migrate.engine.analysis import analyse

GOLDEN = sorted((Path(__file__).parent / "golden").glob("*.in"))


class _Reads(cst.CSTVisitor):
    """Every plain name read: (line, column, name, what LibCST says it is)."""

    METADATA_DEPENDENCIES = (
        ExpressionContextProvider, ParentNodeProvider, PositionProvider, QualifiedNameProvider,
    )

    def __init__(self):
        super().__init__()
        self.reads: list[tuple[int, int, str, str | None]] = []

    def visit_Import(self, node) -> bool:
        return False

    def visit_ImportFrom(self, node) -> bool:
        return False

    def visit_Name(self, node: cst.Name) -> None:
        if self.get_metadata(ExpressionContextProvider, node, None) is not ExpressionContext.LOAD:
            return
        parent = self.get_metadata(ParentNodeProvider, node)
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            return
        position = self.get_metadata(PositionProvider, node).start
        names = self.get_metadata(QualifiedNameProvider, node, set())
        self.reads.append((position.line, position.column, node.value, _libcst_says(names)))


def _libcst_says(names) -> str | None:
    sources = {q.source for q in names}
    if sources == {QualifiedNameSource.IMPORT}:
        imported = {q.name for q in names}
        if len(imported) != 1:
            return None
        (qualified,) = imported
        return "local" if qualified.startswith(".") else f"import {qualified}"
    if sources == {QualifiedNameSource.LOCAL}:
        return "local"
    if sources == {QualifiedNameSource.BUILTIN}:
        return "free"
    return None  # unresolved, or import and assignment both (the engine's rule differs on purpose)


def disagreements(source: str) -> list[str]:
    visitor = _Reads()
    MetadataWrapper(cst.parse_module(source)).visit(visitor)
    out = []
    scopes = analyse(source, None).scopes
    for line, column, name, theirs in visitor.reads:
        if theirs is None:
            continue
        binding = scopes.innermost((line, column)).resolve(name)
        ours = f"import {binding.qualified}" if binding.kind == "import" else binding.kind
        if ours != theirs:
            out.append(f"{line}:{column} {name}: ours {ours}, LibCST {theirs}")
    return out


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_golden_inputs_resolve_as_libcst_resolves_them(path):
    assert disagreements(path.read_text(encoding="utf-8")) == []


SHAPES = """\
import torch
import torch.cuda
import torch.distributed as dist
from torch import cuda as c
from . import sibling
x = 1

def f(a, b=torch, *args, c=c, **kw):
    global x
    y = [torch for torch in range(3)]
    z = [x for x in dist.group if x]
    w = [dist for dist in dist.group]  # the first iterable is read outside the comprehension
    def g():
        nonlocal y
        return y, a, torch.cuda, sibling, len
    return lambda q=c: q + x

class K(torch.nn.Module):
    torch = 1
    attr = torch
    def m(self, v=torch):
        return torch, v, [torch for _ in range(2)]
    values = [attr for _ in range(2)]
    firsts = [t for t in torch for u in [attr for _ in attr]]  # class names: in the first iterable only

for c in range(2):
    pass
with open("f") as handle:
    handle.read()
try:
    pass
except Exception as dist:
    pass
"""


def test_scoping_shapes_resolve_as_libcst_resolves_them():
    # Parameters, defaults, global/nonlocal, comprehensions (also in a class body), lambdas, a class
    # body hidden from its methods, rebinding by for/with/except.
    assert disagreements(SHAPES) == []


@pytest.mark.parametrize("source", [
    "import cuda\nw = [cuda for cuda in cuda.devices()]\n",
    "import torch\nclass A:\n    torch = 2\n    v = [torch for _ in torch.x]\n",
])
def test_a_comprehensions_first_iterable_is_read_in_the_scope_around_it(source):
    assert disagreements(source) == []


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(hypothesmith.from_grammar())
def test_generated_programs_resolve_as_libcst_resolves_them(source):
    try:
        ast.parse(source)
        cst.parse_module(source)
    except (SyntaxError, ValueError, RecursionError, cst.ParserSyntaxError):
        assume(False)
    assert disagreements(source) == []


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(hypothesmith.from_node(cst.Module))
def test_generated_syntax_trees_resolve_as_libcst_resolves_them(source):
    try:
        ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        assume(False)
    assert disagreements(source) == []
