"""Calls into CUDA-only libraries rewritten into portable torch, one row per library name.

A row (`Row`) names the library's parameters in its own order and turns the call's arguments into
the portable call, or gives the reason it cannot (a value with no exact torch equivalent, or one
the codemod cannot read because the program computes it): the call is then left as it is and
reported with the row's report code, so the library's import stays reported too.

Every read of a name an import of the library binds is counted; when each one was part of a
converted call, the import is dead after the rewrite (`portlayer.migrate.engine.settle` removes it) and
the library report (`CudaOnlyLibraries`, which runs after these rules) is not given for it. Names whose use the
program's own fallback or availability check decides (`LEFT_TO_PROGRAM`) are not touched.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

import libcst as cst

from portlayer.migrate.engine.facts import Fact
from portlayer.migrate.engine.guards import OPTIONAL_IMPORTS
from portlayer.migrate.engine.printing import code_of
from portlayer.migrate.rules.base import Rule, dotted
from portlayer.migrate.rules.libraries import FALLBACKS

UNREAD = object()  # a value the program computes: the codemod cannot tell what it is
# The names bound by an import under an `if` or in the `try` of a fallback: the program decides whether they
# are used, not the codemod.
LEFT_TO_PROGRAM = Fact("the names whose use the program's own fallback or check decides",
                       lambda file, facts: facts[OPTIONAL_IMPORTS].checked_names.union(
                           *(fallback.bound_names for fallback in facts[FALLBACKS])))


@dataclass(frozen=True)
class Portable:
    """The portable call: `template` (`{torch}` filled in) with the row's required arguments kept
    positional and `keywords` after them, in order; `message` says what changed, `notes` are diagnostics
    to add. With `whole`, `template` is an expression that replaces the call, `{keyword}` filled in."""

    template: str
    keywords: tuple[tuple[str, cst.BaseExpression], ...]
    message: str
    notes: tuple[tuple[str, str], ...] = ()  # (code, message)
    whole: bool = False


@dataclass(frozen=True)
class Refused:
    reason: str


class Arguments:
    """A call's arguments by the library's parameter names (positional ones named by `parameters`)."""

    def __init__(self, call: cst.Call, parameters: tuple[str, ...]):
        self.nodes: dict[str, cst.BaseExpression] = {}
        self.unknown = False  # *args, **kwargs, or more positional arguments than parameters
        # A keyword the library's version the row follows does not have (an older apex's eps_inside_sqrt=):
        # its positional order may differ too, so the call is not converted.
        self.foreign = [arg.keyword.value for arg in call.args if arg.keyword is not None
                        and arg.keyword.value not in parameters]
        for position, arg in enumerate(call.args):
            if arg.star or (arg.keyword is None and position >= len(parameters)):
                self.unknown = True
            elif arg.keyword is None:
                self.nodes[parameters[position]] = arg.value
            else:
                self.nodes[arg.keyword.value] = arg.value

    def given(self, name: str) -> bool:
        return name in self.nodes

    def value(self, name: str, default=None):
        """The argument's Python value when it is a literal, `default` when not given, else UNREAD."""
        node = self.nodes.get(name)
        if node is None:
            return default
        try:
            return ast.literal_eval(code_of(node))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return UNREAD

    def keywords(self, *names: str, **defaults: str) -> tuple[tuple[str, cst.BaseExpression], ...]:
        """`names` that were given, in that order; then `defaults` (name -> code) given or not: the
        library's default made explicit where torch's differs."""
        out = [(name, self.nodes[name]) for name in names if name in self.nodes]
        for name, code in defaults.items():
            out.append((name, self.nodes.get(name) or cst.parse_expression(code)))
        return tuple(out)


def differs(arguments: Arguments, **library_defaults) -> str | None:
    """The first argument given a value other than the library default (or one the codemod cannot
    read), as `name=value`; None when all match."""
    for name, default in library_defaults.items():
        value = arguments.value(name, default)
        if value is UNREAD or value != default:
            return f"{name}={code_of(arguments.nodes[name])}"
    return None


@dataclass(frozen=True)
class Row:
    parameters: tuple[str, ...]  # the library's, in order
    convert: Callable[[Arguments], Portable | Refused]
    code: str  # the conversion's code (PL12x)
    report: str  # the code a refused call is reported with
    required: int = 1  # the leading parameters without a default: kept positional


class LibraryCalls(Rule):
    """Subclasses set TRIGGER, ROWS (qualified name -> Row) and LIBRARIES (their top-level packages)."""

    ROWS: ClassVar[Mapping[str, Row]]
    LIBRARIES: ClassVar[frozenset[str]]
    LOOKS_ACROSS_STATEMENTS = True  # a library's import goes only when every read of its names was converted
    NEEDS = (LEFT_TO_PROGRAM,)

    def __init__(self, *args):
        super().__init__(*args)
        # Names bound by an import of the libraries -> (reads, reads in converted calls).
        self.reads: dict[str, list[int]] = {}

    def visit_Name(self, node: cst.Name) -> None:
        name = self.qualified(node)
        if name is not None and name.split(".")[0] in self.LIBRARIES:
            self.reads.setdefault(node.value, [0, 0])[0] += 1

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        row = self.row_for(original_node)
        if row is None:
            return updated_node
        arguments = Arguments(updated_node, row.parameters)
        required = row.parameters[: row.required]
        missing = [name for name in required if not arguments.given(name)]
        outcome = (Refused("its arguments are spread (*args, **kwargs)") if arguments.unknown
                   else Refused(f"`{arguments.foreign[0]}=` is not a parameter of the version converted")
                   if arguments.foreign
                   else Refused(f"no `{missing[0]}` argument") if missing
                   else row.convert(arguments))
        name = self.qualified(original_node.func)
        if isinstance(outcome, Refused):
            self.report(row.report, original_node, f"{name}: {outcome.reason}; left as is")
            return updated_node
        self.converted(row.code, original_node, f"{name} -> {outcome.message}", original_node.func)
        for code, message in outcome.notes:
            self.report(code, original_node, f"{name}: {message}")
        if outcome.whole:
            return self.expression(outcome.template, **dict(outcome.keywords))
        args = [*(cst.Arg(arguments.nodes[name]) for name in required),
                *(self.keyword(keyword, value) for keyword, value in outcome.keywords)]
        return updated_node.with_changes(func=self.expression(outcome.template), args=args)

    def converted(self, code: str, node: cst.CSTNode, message: str, *reads: cst.BaseExpression) -> None:
        """Record a conversion of `node`, whose library names `reads` it no longer reads: the import goes with
        the last of them."""
        for expression in reads:  # a name or attribute chain: the library name it starts with
            head = head_name(expression)
            if head is not None:
                self.reads.setdefault(head, [0, 0])[1] += 1
        self.changed(code, node, message, needs_runtime=False)
        self.requests.converted_libraries.update(self.LIBRARIES)

    def row_for(self, call: cst.Call) -> Row | None:
        if self.excluded(call):
            return None
        head = head_name(call.func)
        if head is None or head in self.fact(LEFT_TO_PROGRAM):
            return None
        return self.ROWS.get(self.qualified(call.func) or "")

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        self.requests.converted_names.update(name for name, (read, converted) in self.reads.items()
                                             if read == converted)
        return updated_node


def head_name(func: cst.BaseExpression) -> str | None:
    """`a` for `a.b.c`; None for anything not a plain name or attribute chain."""
    name = dotted(func)
    return None if name is None else name.split(".")[0]
