"""The migrate engine: one Python source in, the migrated source and its report out.

    from portlayer.migrate.engine import migrate_source
    result = migrate_source(source, target="neutral")   # or "torch", "npu", "musa"
    result.code, result.changes, result.diagnostics

What is inside, in the order a source meets it:
- `triggers`: the words a rule can fire on; a file with none of its target's words is skipped unparsed.
- `analysis` and `scopes`: one CPython `ast` walk picks the statements a rule can fire on and resolves
  every name in them to what it is bound to (`torch.cuda.synchronize`, whatever the aliases).
- `snippets`: only those statements reach LibCST, as one small module; printed back, they are spliced
  into the file, and every other byte stays as it was.
- `pipeline`: each rule (`portlayer.migrate.rules`) runs over the snippets in turn; then `imports` adds
  and removes imports once, so no rule shifts another's lines.
"""

from portlayer.migrate.engine.pipeline import (
    TARGETS,
    MigrationResult,
    SourceError,
    mentions_cuda,
    migrate_source,
    prefilter,
    run_rules,
)

__all__ = ["TARGETS", "MigrationResult", "SourceError", "mentions_cuda", "migrate_source", "prefilter", "run_rules"]
