"""`portlayer migrate`'s engine: a LibCST codemod from CUDA-specific PyTorch to portable code.

    from portlayer.migrate.engine import migrate_source
    result = migrate_source(source, target="neutral")   # or "torch", "npu", "musa"
    result.code, result.changes, result.diagnostics
"""
