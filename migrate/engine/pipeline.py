"""The codemod's entry point: one Python source in, the migrated source and its report out.

It never imports or runs the code it rewrites. CPython's parser finds the statements a rule can fire
on (`portlayer.migrate.engine.analysis`); only those reach LibCST, as one small module (`portlayer.migrate.engine.snippets`), and each
concern is one transformer over it (`migrate/rules/`), run in sequence. Imports are added and removed
once, after every rule has run, so that no rule shifts the lines of another: every `Change` and
`Diagnostic` points at a line of the input.
"""

from __future__ import annotations

import operator
import re
import sys
from functools import reduce

import libcst as cst
from libcst.metadata import MetadataWrapper

from portlayer.migrate.engine import regions
from portlayer.migrate.engine.analysis import analyse
from portlayer.migrate.engine.annotate import Annotate
from portlayer.migrate.engine.dataflow import find_data_flow, int_device_diagnostics
from portlayer.migrate.engine.guards import dispatch_diagnostics, find_guards
from portlayer.migrate.engine.imports import ImportPlan
from portlayer.migrate.engine.locations import NodeLocations
from portlayer.migrate.engine.program_fallbacks import Fallback, find_fallbacks
from portlayer.migrate.engine.quotes import QuotesInsideFStrings
from portlayer.migrate.engine.snippets import Snippets
from portlayer.migrate.engine.triggers import Prefilter
from portlayer.migrate.results import Change, Diagnostic, MigrationResult, SourceError
from portlayer.migrate.rules import RULES, CudaOnlyLibraries
from portlayer.migrate.rules.base import FileContext, Rule
from portlayer.migrate.rules.int_devices import IntDeviceIndices
from portlayer.migrate.rules.libraries import FALLBACK_LIBRARIES
from portlayer.migrate.targets import TARGETS, Target, target_named

__all__ = ["TARGETS", "migrate_source", "may_change", "prefilter", "SourceError", "MigrationResult"]


# An f-string prefix (f, rf, fr in any case) where a string starts.
_F_STRING = re.compile(r"(?i)(?<!\w)(?:rf|fr|f)['\"]")


def _prefilter_for(target: Target) -> Prefilter:
    """The file test: the rules' `file_words` (a file with none comes out byte-identical, so the driver
    skips it before parsing); the statements of a file that passes are picked by every rule's TRIGGER."""
    rules = [rule for rule in RULES if rule.fires_for(target)]
    return Prefilter(reduce(operator.or_, (rule.file_words(target) for rule in rules)),
                     reduce(operator.or_, (rule.TRIGGER for rule in rules)))


_PREFILTERS = {name: _prefilter_for(target_named(name)) for name in TARGETS}


def prefilter(target: Target) -> Prefilter:
    return _PREFILTERS[target.name]


def may_change(source: str, target: str = "neutral") -> bool:
    """Cheap test: False means `migrate_source` would return `source` unchanged and report nothing."""
    return prefilter(target_named(target)).matches(source)


def migrate_source(source: str, target: str = "neutral", *, annotate: bool = False) -> MigrationResult:
    """Migrate one Python module's source to `target` (one of TARGETS).

    Raises ValueError for an unknown target and SourceError when `source` is not parseable Python.
    """
    chosen = target_named(target)
    if not prefilter(chosen).matches(source):
        return MigrationResult(source, (), (), source)
    return run_rules(source, chosen, annotate=annotate)


def run_rules(source: str, target: Target, *, annotate: bool = False, every_rule: bool = False) -> MigrationResult:
    """The rules over `source`, without the prefilter; with `every_rule`, every rule over every statement,
    not only those the code's words call for (tests use both to check the prefilter and that choice)."""
    try:
        analysis = analyse(source, None if every_rule else prefilter(target).trigger)
    except SyntaxError as exc:
        # Code written for a newer Python than this one fails here too: say which grammar judged it.
        grammar = f"Python {sys.version_info.major}.{sys.version_info.minor}"
        raise SourceError(exc.lineno or 1, exc.offset or 1, f"{exc.msg} (as {grammar} parses it)") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        raise SourceError(1, 1, _first_line_of(exc)) from None
    rules = [rule for rule in RULES if rule.fires_for(target) and (every_rule or rule.trigger.search(analysis.words))]
    if not rules or not analysis.spans:
        return MigrationResult(source, (), (), source)
    snippets = Snippets(analysis.lines, analysis.spans)
    tree = _parse(snippets)
    guards = find_guards(analysis.tree, analysis.lines, target, CudaOnlyLibraries in rules)
    flow = find_data_flow(analysis.tree, source, IntDeviceIndices in rules)
    excluded = regions.excluded_lines(source)
    skipped = excluded | guards.dispatch_lines
    has_fallbacks = CudaOnlyLibraries in rules and not analysis.packages.isdisjoint(FALLBACK_LIBRARIES)
    fallbacks = find_fallbacks(analysis.tree, FALLBACK_LIBRARIES) if has_fallbacks else []
    taken_flags = tuple(f.statement.lineno not in skipped for f in fallbacks)
    taken = [f for f, is_taken in zip(fallbacks, taken_flags) if is_taken]
    context = FileContext(
        ImportPlan(), target, skipped, analysis.imports,
        analysis.scopes, snippets.file_line, guards.optional_imports,
        frozenset(flow.int_names), frozenset(flow.device_string_lines),
        frozenset(line for f in taken for line in range(f.statement.lineno, f.statement.end_lineno + 1)),
        frozenset(guards.checked_names).union(*(f.bound_names for f in fallbacks)),
        int_lists=frozenset(flow.int_lists),
    )
    # Parents and positions are found again only after a rule has changed the tree.
    locations = NodeLocations(tree, analysis.spans)
    changes: list[Change] = [_fallback_taken(f) for f in taken]
    context.imports.fallback_libraries = FALLBACK_LIBRARIES
    context.imports.fallbacks_taken = taken_flags
    diagnostics: list[Diagnostic] = []
    for rule_class in rules:
        rule = rule_class(context)
        rule.locations = locations
        everywhere = every_rule or rule_class.LOOKS_ACROSS_STATEMENTS
        rewritten = _visit(tree, rule, None if everywhere else analysis.span_words)
        diagnostics += rule.diagnostics
        if rule.changes:
            changes += rule.changes
            tree = rewritten
            locations = locations.after(tree)
    diagnostics += dispatch_diagnostics(guards, excluded)
    if prefilter(target).matches(source):  # `device = 0` is CUDA code where the file is
        diagnostics += int_device_diagnostics(flow, excluded)
    diagnostics = sorted(set(diagnostics), key=lambda d: (d.line, d.col, d.code))
    if annotate and diagnostics:
        tree = MetadataWrapper(tree, unsafe_skip_copy=True).visit(Annotate(diagnostics, snippets.file_line, analysis.lines))
    if changes and _F_STRING.search(source):  # no rule writes an f-string: only the source's own can hold one
        tree = tree.visit(QuotesInsideFStrings())
    code = snippets.splice(tree) if changes or (annotate and diagnostics) else source
    changes.sort(key=lambda c: (c.line, c.col, c.code))
    if changes:
        code, added = context.imports.apply(code)
        # An added import is reported at the first conversion that needed it.
        changes[1:1] = [Change("PL110", changes[0].line, changes[0].col, f"added `import {module}`")
                        for module in added]
    return MigrationResult(code, tuple(changes), tuple(diagnostics), source)


def _visit(tree: cst.Module, rule: Rule, span_words: list[str | None] | None) -> cst.Module:
    """`rule` over the top-level statements (spans) whose words its trigger matches; over the whole
    module, its `visit_Module`/`leave_Module` included, if `span_words` is None. A statement the rule
    does not visit keeps its nodes (a LibCST visit copies every node it passes), and so its positions."""
    if span_words is None:
        return tree.visit(rule)
    body = [statement.visit(rule) if words is None or rule.trigger.search(words) else statement
            for statement, words in zip(tree.body, span_words)]
    return tree.with_changes(body=body)


def _fallback_taken(fallback: Fallback) -> Change:
    statement = fallback.statement
    return Change("PL120", statement.lineno, statement.col_offset + 1,
                  f"`try: import {fallback.module}` removed: the program's own fallback (its `except` body) runs")


def _parse(snippets: Snippets) -> cst.Module:
    """The statements CPython parsed, parsed by LibCST (which may lag behind a new Python's syntax)."""
    try:
        return cst.parse_module(snippets.source)
    except cst.ParserSyntaxError as exc:
        line = snippets.file_line(exc.raw_line) or 1
        raise SourceError(line, exc.raw_column + 1, exc.message) from None
    except (ValueError, RecursionError) as exc:  # libcst's tokenizer rejects some inputs this way
        raise SourceError(1, 1, _first_line_of(exc)) from None


def _first_line_of(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
