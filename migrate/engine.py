"""The codemod's entry point: one Python source in, the migrated source and its report out.

It never imports or runs the code it rewrites. Each concern is one transformer (`migrate/rules/`), run
in sequence over the module. Imports are added and removed once, after every rule has run, so that
no rule shifts the lines of another: every `Change` and `Diagnostic` points at a line of the input.
"""

from __future__ import annotations

import re

import libcst as cst
from libcst.metadata import MetadataWrapper

from migrate import candidates, regions
from migrate.annotate import Annotate
from migrate.imports import ImportPlan
from migrate.model import Change, Diagnostic, MigrationResult, SourceError
from migrate.rules import RULES
from migrate.targets import TARGETS, Target, target_named

__all__ = ["TARGETS", "migrate_source", "mentions_cuda", "prefilter", "SourceError", "MigrationResult"]

# Per target, every token a rule that fires for it can fire on (see each rule's TRIGGER). A file that
# matches none comes out byte-identical, so the driver can skip it before parsing.
_PREFILTERS = {
    name: re.compile("|".join(rule.TRIGGER for rule in RULES if rule.fires_for(target_named(name))), re.IGNORECASE)
    for name in TARGETS
}


def prefilter(target: Target) -> re.Pattern:
    return _PREFILTERS[target.name]


def mentions_cuda(source: str, target: str = "neutral") -> bool:
    """Cheap test: False means `migrate_source` would return `source` unchanged and report nothing."""
    return prefilter(target_named(target)).search(source) is not None


def migrate_source(source: str, target: str = "neutral", *, annotate: bool = False) -> MigrationResult:
    """Migrate one Python module's source to `target` (one of TARGETS).

    Raises ValueError for an unknown target and SourceError when `source` is not parseable Python.
    """
    chosen = target_named(target)
    if not prefilter(chosen).search(source):
        return MigrationResult(source, (), (), source)
    return run_rules(source, chosen, annotate=annotate)


def run_rules(source: str, target: Target, *, annotate: bool = False, every_rule: bool = False) -> MigrationResult:
    """The rules over `source`, without the prefilter; with `every_rule`, every rule, not only those whose
    trigger the code matches (tests use both to check the prefilter and that choice are sound)."""
    # Which rules can fire, judged on the code alone: a source that mentions CUDA only in comments and
    # docstrings is done without LibCST. Source CPython cannot parse is left to LibCST to judge.
    text = None if every_rule else candidates.code_text(source)
    rules = [rule for rule in RULES if rule.fires_for(target) and (text is None or rule.trigger.search(text))]
    if not rules:
        return MigrationResult(source, (), (), source)
    tree = _parse(source)
    # Metadata (scopes, qualified names) is the expensive part: it is computed again only after a
    # rule has changed the tree.
    wrapper = MetadataWrapper(tree, unsafe_skip_copy=True)
    imports = ImportPlan()
    excluded = regions.excluded_lines(source)
    changes: list[Change] = []
    diagnostics: list[Diagnostic] = []
    for rule_class in rules:
        rule = rule_class(imports, target, excluded)
        rewritten = wrapper.visit(rule)
        diagnostics += rule.diagnostics
        if rule.changes:
            changes += rule.changes
            tree = rewritten
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
