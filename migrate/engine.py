"""The codemod's entry point: one Python source in, the migrated source and its report out.

It never imports or runs the code it rewrites. Each concern is one transformer (`migrate/rules/`), run
in sequence over the module. Imports are added and removed once, after every rule has run, so that
no rule shifts the lines of another: every `Change` and `Diagnostic` points at a line of the input.
"""

from __future__ import annotations

import re

import libcst as cst
from libcst.metadata import MetadataWrapper

from migrate import regions
from migrate.annotate import Annotate
from migrate.imports import ImportPlan
from migrate.model import Change, Diagnostic, MigrationResult, SourceError
from migrate.rules import RULES
from migrate.targets import TARGETS, Target, target_named

__all__ = ["TARGETS", "migrate_source", "mentions_cuda", "SourceError", "MigrationResult"]

# Every token any rule can fire on (see each rule's TRIGGER). A file that matches none of these comes
# out byte-identical, so the driver can skip it before parsing.
_PREFILTER = re.compile("|".join(rule.TRIGGER for rule in RULES), re.IGNORECASE)


def mentions_cuda(source: str) -> bool:
    """Cheap test: False means `migrate_source` would return `source` unchanged and report nothing."""
    return _PREFILTER.search(source) is not None


def migrate_source(source: str, target: str = "neutral", *, annotate: bool = False) -> MigrationResult:
    """Migrate one Python module's source to `target` (one of TARGETS).

    Raises ValueError for an unknown target and SourceError when `source` is not parseable Python.
    """
    chosen = target_named(target)
    if not mentions_cuda(source):
        return MigrationResult(source, (), (), source)
    return run_rules(source, chosen, annotate=annotate)


def run_rules(source: str, target: Target, *, annotate: bool = False) -> MigrationResult:
    """Every rule over `source`, without the prefilter (tests use it to check the prefilter is sound)."""
    tree = _parse(source)
    # Metadata (scopes, qualified names) is the expensive part: it is computed again only after a
    # rule has changed the tree.
    wrapper = MetadataWrapper(tree, unsafe_skip_copy=True)
    code = source
    imports = ImportPlan()
    excluded = regions.excluded_lines(source)
    changes: list[Change] = []
    diagnostics: list[Diagnostic] = []
    for rule_class in RULES:
        if not rule_class.trigger.search(code):
            continue
        rule = rule_class(imports, target, excluded)
        rewritten = wrapper.visit(rule)
        diagnostics += rule.diagnostics
        if rule.changes:
            changes += rule.changes
            tree, code = rewritten, rewritten.code
            wrapper = MetadataWrapper(tree, unsafe_skip_copy=True)
    diagnostics = sorted(set(diagnostics), key=lambda d: (d.line, d.col, d.code))
    if annotate and diagnostics:
        tree = wrapper.visit(Annotate(diagnostics))
    changes.sort(key=lambda c: (c.line, c.col, c.code))
    if changes:
        tree, added = imports.apply(tree)
        # An added import is reported at the first conversion that needed it.
        changes[1:1] = [Change("PL110", changes[0].line, changes[0].col, f"added `import {module}`")
                        for module in added]
    return MigrationResult(tree.code, tuple(changes), tuple(diagnostics), source)


def _parse(source: str) -> cst.Module:
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise SourceError(exc.raw_line, exc.raw_column + 1, exc.message) from None
    except (ValueError, RecursionError) as exc:  # libcst's tokenizer rejects some inputs this way
        raise SourceError(1, 1, str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
