"""PEP 695 type parameters (Python 3.12): `def f[T]`, `class C[T]`, `type X[T] = …` open an annotation
scope that binds the parameters; defaults and decorators are read outside it, a class body's names are
visible in it (PEP 695, "Scoping behavior").

This interpreter may be older than 3.12; then its parser rejects such code, and the engine must say
which grammar judged it (PL901). The scope code is tested either way, on the tree CPython 3.12 builds,
made here by hand from the same text with the bracketed parameters blanked out (columns unchanged).
"""

from __future__ import annotations

import ast
import sys

import pytest

from portlayer.migrate.engine import SourceError, migrate_source
from portlayer.migrate.engine.analysis import _Walk, source_lines
from portlayer.migrate.engine.scopes import FREE, LOCAL, Binding

GENERIC = """\
import torch

def f[T: torch.Tensor](x: T = T, y=torch) -> T:
    return T, torch

class C[S](Base[S]):
    attr = S

class D:
    K = torch
    def m[V](self, a: K) -> V:
        return K

type Alias[U] = list[U] | torch.Tensor
"""
IMPORT = Binding("import", "torch")


class TypeVar(ast.AST):  # ast.TypeVar as CPython 3.12 has it
    _fields = ("name", "bound")


class TypeAlias(ast.stmt):  # ast.TypeAlias as CPython 3.12 has it
    _fields = ("name", "type_params", "value")


def _type_var(line: int, text: str, name: str, bound: ast.expr | None = None) -> TypeVar:
    node = TypeVar(name=name, bound=bound)
    column = text.index(f"[{name}") + 1
    node.lineno, node.col_offset, node.end_lineno, node.end_col_offset = line, column, line, column + 1
    return node


def tree_as_3_12_builds_it() -> ast.Module:
    lines = GENERIC.splitlines(keepends=True)
    blank = [
        lines[2].replace("[T: torch.Tensor]", " " * 17),
        lines[5].replace("[S]", "   ", 1),
        lines[10].replace("[V]", "   "),
        lines[13].replace("type Alias[U] = ", "Alias" + " " * 8 + " = "),
    ]
    text = "".join(lines[:2] + [blank[0]] + lines[3:5] + [blank[1]] + lines[6:10] + [blank[2]] + lines[11:13] + [blank[3]])
    tree = ast.parse(text)
    bound = ast.parse("torch.Tensor", mode="eval").body
    ast.increment_lineno(bound, 2)
    for node in ast.walk(bound):
        if hasattr(node, "col_offset"):
            node.col_offset += lines[2].index("torch.Tensor")
            node.end_col_offset += lines[2].index("torch.Tensor")
    f, c, d, assign = tree.body[1], tree.body[2], tree.body[3], tree.body[4]
    f.type_params = [_type_var(3, lines[2], "T", bound)]
    c.type_params = [_type_var(6, lines[5], "S")]
    d.body[1].type_params = [_type_var(11, lines[10], "V")]
    alias = TypeAlias(name=ast.Name("Alias", ast.Store()), type_params=[_type_var(14, lines[13], "U")], value=assign.value)
    alias.name.lineno, alias.name.col_offset, alias.name.end_lineno, alias.name.end_col_offset = 14, 5, 14, 10
    for field in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
        setattr(alias, field, getattr(assign, field))
    alias.col_offset = 0
    tree.body[4] = alias
    return tree


def scopes_of_generic_code():
    walk = _Walk(source_lines(GENERIC), None)
    walk.run(tree_as_3_12_builds_it())
    return walk.module_scope


def at(line: int, text: str, occurrence: int = 0) -> tuple[int, int]:
    """(line, column) of the `occurrence`-th `text` on 1-based `line` of GENERIC."""
    row = GENERIC.splitlines()[line - 1]
    column = -1
    for _ in range(occurrence + 1):
        column = row.index(text, column + 1)
    return line, column


@pytest.mark.parametrize(
    "line, text, occurrence, name, expected",
    [
        (3, "T", 2, "T", LOCAL),  # the annotation `x: T`
        (3, "T", 3, "T", FREE),  # the default `= T`: read outside the type parameters
        (3, "torch)", 0, "torch", IMPORT),  # the default `y=torch`
        (3, "torch.Tensor", 0, "torch", IMPORT),  # the bound
        (3, "-> T", 0, "T", LOCAL),
        (4, "T", 0, "T", LOCAL),  # the body
        (4, "torch", 0, "torch", IMPORT),
        (6, "Base[S]", 0, "S", LOCAL),  # the bases
        (7, "S", 0, "S", LOCAL),  # the class body
        (11, "K)", 0, "K", LOCAL),  # a method's annotation sees the class body's names ...
        (12, "K", 0, "K", FREE),  # ... its body does not
        (14, "list[U]", 0, "U", LOCAL),  # the alias's value
        (14, "torch", 0, "torch", IMPORT),
    ],
)
def test_type_parameters_bind_in_their_own_scope(line, text, occurrence, name, expected):
    position = at(line, text, occurrence)
    if text.startswith(("Base", "list")):
        position = (line, position[1] + text.index(name))
    elif text.startswith("-> "):
        position = (line, position[1] + 3)

    assert scopes_of_generic_code().innermost(position).resolve(name) == expected


def test_outside_the_definitions_the_type_parameters_are_unbound_and_the_names_they_define_bound():
    module = scopes_of_generic_code()

    assert [module.resolve(name) for name in ("T", "S", "U", "f", "C", "Alias")] == [FREE] * 3 + [LOCAL] * 3


def test_generic_code_is_migrated_or_named_as_too_new_for_this_python():
    source = GENERIC + "torch.cuda.synchronize()\n"
    if sys.version_info >= (3, 12):
        assert "portlayer.synchronize()" in migrate_source(source).code
        return
    with pytest.raises(SourceError) as raised:
        migrate_source(source)
    assert raised.value.line == 3
    assert f"(as Python {sys.version_info.major}.{sys.version_info.minor} parses it)" in raised.value.message
