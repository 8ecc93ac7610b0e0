"""The codemod's entry point: one Python source in, the migrated source and its report out.

It never imports or runs the code it rewrites. CPython's parser finds the statements a rule can fire
on (`portlayer.migrate.engine.analysis`); only those reach LibCST, as one small module
(`portlayer.migrate.engine.snippets`), and each concern is one transformer over it (`migrate/rules/`), run
in sequence after the file rules, which need no statement. What a rule knows of the whole file beyond
its statements is a fact it declares (`portlayer.migrate.engine.facts`), computed only if such a rule asks.
What needs the whole migrated text (imports added and removed, fallbacks taken) is done once, after every
rule has run (`portlayer.migrate.engine.settle`), so that no rule shifts the lines of another: every
`Change` and `Diagnostic` points at a line of the input.
"""

from __future__ import annotations

import operator
import re
import sys
from functools import reduce

import libcst as cst
from libcst.metadata import MetadataWrapper

from portlayer.migrate.engine.analysis import Analysis, analyse
from portlayer.migrate.engine.annotate import Annotate
from portlayer.migrate.engine.context import EXCLUDED_LINES, FileContext, Requests
from portlayer.migrate.engine.facts import Facts, SourceFile
from portlayer.migrate.engine.locations import NodeLocations
from portlayer.migrate.engine.quotes import QuotesInsideFStrings
from portlayer.migrate.engine.settle import settle
from portlayer.migrate.engine.snippets import Snippets
from portlayer.migrate.engine.triggers import Prefilter, Trigger
from portlayer.migrate.results import Change, Diagnostic, MigrationResult, SourceError
from portlayer.migrate.rules import RULES
from portlayer.migrate.rules.base import BaseRule, FileRule, Rule
from portlayer.migrate.targets import TARGETS, Target, target_named

__all__ = ["TARGETS", "migrate_source", "may_change", "prefilter", "SourceError", "MigrationResult"]


# An f-string prefix (f, rf, fr in any case) where a string starts.
_F_STRING = re.compile(r"(?i)(?<!\w)(?:rf|fr|f)['\"]")


def _prefilter_for(target: Target) -> Prefilter:
    """The file test: the rules' `file_words` (a file with none comes out byte-identical, so the driver
    skips it before parsing); the statements of a file that passes are picked by every rule's TRIGGER."""
    rules = [rule for rule in RULES if issubclass(rule, Rule) and rule.fires_for(target)]
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
    analysis = _analyse(source, None if every_rule else prefilter(target).trigger)
    rules = [rule for rule in RULES if rule.fires_for(target)]
    statement_rules = [rule for rule in rules if issubclass(rule, Rule)
                       and (every_rule or rule.trigger.search(analysis.words))]
    if not statement_rules or not analysis.spans:
        return MigrationResult(source, (), (), source)
    # A file rule speaks only in a file the file test passes, as `migrate_source` runs the rules on no other
    # (`device = 0` is CUDA code where the file has some).
    file_rules = [rule for rule in rules if issubclass(rule, FileRule)] if prefilter(target).matches(source) else []
    snippets = Snippets(analysis.lines, analysis.spans)
    tree = _parse(snippets)
    run = _FileRun(source, target, analysis, snippets)
    for rule_class in file_rules:
        rule = rule_class(run.context, run.requests)
        rule.check()
        run.record(rule)
    return run.result(run.rewrite(tree, statement_rules, every_rule), annotate)


class _FileRun:
    """One file through the rules: what they share of it, what they found, and what they ask for."""

    def __init__(self, source: str, target: Target, analysis: Analysis, snippets: Snippets):
        self.source = source
        self.analysis = analysis
        self.snippets = snippets
        facts = Facts(SourceFile(source, analysis.lines, analysis.tree, target, analysis.packages))
        self.context = FileContext(target=target, module=analysis.imports, scopes=analysis.scopes,
                                   file_line=snippets.file_line, excluded_lines=facts[EXCLUDED_LINES], facts=facts)
        self.requests = Requests()
        self.changes: list[Change] = []
        self.diagnostics: list[Diagnostic] = []

    def record(self, rule: BaseRule) -> None:
        self.changes += rule.changes
        self.diagnostics += rule.diagnostics

    def rewrite(self, tree: cst.Module, rules: list[type[Rule]], every_rule: bool) -> cst.Module:
        """`tree` with each rule's rewrite, in turn."""
        # Parents and positions are found again only after a rule has changed the tree.
        locations = NodeLocations(tree, self.analysis.spans)
        for rule_class in rules:
            rule = rule_class(self.context, self.requests, locations)
            everywhere = every_rule or rule_class.LOOKS_ACROSS_STATEMENTS
            rewritten = _visit(tree, rule, None if everywhere else self.analysis.span_words)
            self.record(rule)
            if rule.changes:
                tree = rewritten
                locations = locations.after(tree)
        return tree

    def result(self, tree: cst.Module, annotate: bool) -> MigrationResult:
        """The file with the rewritten statements spliced in and the requests done, and what was found."""
        diagnostics = sorted(set(self.diagnostics), key=lambda d: (d.line, d.col, d.code))
        changes = sorted(self.changes, key=lambda c: (c.line, c.col, c.code))
        if annotate and diagnostics:
            annotation = Annotate(diagnostics, self.snippets.file_line, self.analysis.lines)
            tree = MetadataWrapper(tree, unsafe_skip_copy=True).visit(annotation)
        if changes and _F_STRING.search(self.source):  # no rule writes an f-string: only the source's own can
            tree = tree.visit(QuotesInsideFStrings())
        code = self.snippets.splice(tree) if changes or (annotate and diagnostics) else self.source
        if changes:
            code, added, settled = settle(code, self.requests)
            # An added import is reported at the first conversion that needed it.
            changes[1:1] = [Change("PL110", changes[0].line, changes[0].col, f"added `import {module}`")
                            for module in added]
            return MigrationResult(code, tuple(changes), tuple(diagnostics), self.source, settled)
        return MigrationResult(code, tuple(changes), tuple(diagnostics), self.source)


def _analyse(source: str, trigger: Trigger | None) -> Analysis:
    try:
        return analyse(source, trigger)
    except SyntaxError as exc:
        # Code written for a newer Python than this one fails here too: say which grammar judged it.
        grammar = f"Python {sys.version_info.major}.{sys.version_info.minor}"
        raise SourceError(exc.lineno or 1, exc.offset or 1, f"{exc.msg} (as {grammar} parses it)") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        raise SourceError(1, 1, _first_line_of(exc)) from None


def _visit(tree: cst.Module, rule: Rule, span_words: list[str | None] | None) -> cst.Module:
    """`rule` over the top-level statements (spans) whose words its trigger matches; over the whole
    module, its `visit_Module`/`leave_Module` included, if `span_words` is None. A statement the rule
    does not visit keeps its nodes (a LibCST visit copies every node it passes), and so its positions."""
    if span_words is None:
        return tree.visit(rule)
    body = [statement.visit(rule) if words is None or rule.trigger.search(words) else statement
            for statement, words in zip(tree.body, span_words)]
    return tree.with_changes(body=body)


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
