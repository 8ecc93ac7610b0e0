"""The migrate engine: one Python source in, the migrated source and its report out. The rest of
portlayer (the driver, `job`, the tests of the command, the benches) imports only from here.

    from portlayer.migrate.engine import migrate_source
    result = migrate_source(source, target="neutral")   # or "torch", "npu", "musa"
    result.code, result.changes, result.diagnostics

What is inside, in the order a source meets it:
- `triggers`: the words a rule can fire on; a file with none of its target's words is skipped unparsed.
- `analysis` and `scopes`: one CPython `ast` walk picks the statements a rule can fire on and resolves
  every name in them to what it is bound to (`torch.cuda.synchronize`, whatever the aliases).
- `snippets`: only those statements reach LibCST, as one small module; printed back (`printing`), they
  are spliced into the file, and every other byte stays as it was.
- `facts`: what the rules know of the whole file beyond their statements (`dataflow`, `guards`, `regions`),
  each computed once, and only for a rule that declares it.
- `pipeline`: the file rules, then each rule (`portlayer.migrate.rules`) over the snippets in turn; then
  `settle` does what they asked of the whole text (imports added and removed, fallbacks taken) once, so
  no rule shifts another's lines. The engine names no rule.

How to write a rule (five things to know; the rest is the engine's business):
1. A rule is a `libcst.CSTTransformer` subclass of `portlayer.migrate.rules.base.Rule` (or of
   `ReferenceRule`, whose `reference(node)` sees each outermost name or attribute chain), in a module of
   `migrate/rules/`, listed in `RULES` (`migrate/rules/__init__.py`) where its order matters.
2. `TRIGGER = Words(("cuda",), whole=("apex",))`: every word the rule can fire on. Only statements whose
   code has one (or that read a name an import with one binds) are shown to it, and files with none
   are skipped; a word missing here is a site silently missed (tests/migrate/test_statements.py runs
   every rule over every statement to catch that). `fires_for(target)` returns False for targets on
   which the rule never acts; `file_words(target)` narrows the words that send a file through the rules
   at all, for words common outside CUDA code (`rank`). `Words(imported=("apex",))`: a package that
   matters where it is imported.
3. Ask, never guess: `self.qualified(node)` is what a name or chain refers to through the file's imports
   and scopes ("torch.cuda.synchronize" for `th.cuda.synchronize` after `import torch as th`; None for
   a local `cuda`). Rewrite in `leave_*` by returning the new node; build it with
   `self.expression("{torch}.device({d})", d=node)` (nodes are printed with `code_of`).
4. Record what you did: `self.changed("PL1nn", original_node, "a -> b")` for a conversion,
   `self.report("PLnnn", node)` for a site left to a human; the code's row in `migrate/codes.py` gives
   its title, hint and severity (`Diagnostic.of`). Positions are the file's, 1-based. Add a golden
   input/output pair under tests/migrate/golden/ and a program that uses the construct and still runs
   once migrated: the migrated program, not a count of sites, is the measure.
5. `NEEDS = (INT_NAMES,)`: the facts about the whole file the rule reads, each with `self.fact(INT_NAMES)`
   (reading an undeclared one raises); `self.requests` takes what it asks of the whole migrated text.
docs/migrate-rules.md says the same with an example.
"""

from portlayer.migrate.engine.analysis import parse_python
from portlayer.migrate.engine.pipeline import (
    TARGETS,
    MigrationResult,
    SourceError,
    may_change,
    migrate_source,
    prefilter,
    run_rules,
)
from portlayer.migrate.engine.printing import code_of

__all__ = [
    "TARGETS",
    "MigrationResult",
    "SourceError",
    "code_of",
    "may_change",
    "migrate_source",
    "parse_python",
    "prefilter",
    "run_rules",
]
