"""What an import statement binds, and whether an `except` clause catches the ImportError of a
missing module: shared by the guards (optional imports) and the engine (fallbacks, unused imports)."""

from __future__ import annotations

import ast

# What an `except` must catch to catch the ImportError of a missing library.
_CATCHES_IMPORT_ERROR = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def alias_binding(statement: ast.Import | ast.ImportFrom, alias: ast.alias) -> str:
    """The name an import's alias binds (`a` for `import a.b`)."""
    if isinstance(statement, ast.Import):
        return alias.asname or alias.name.split(".")[0]
    return alias.asname or alias.name


def bound_names(statement: ast.Import | ast.ImportFrom) -> list[str]:
    return [alias_binding(statement, alias) for alias in statement.names if alias.name != "*"]


def catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any((getattr(t, "id", None) or getattr(t, "attr", None)) in _CATCHES_IMPORT_ERROR for t in types)


def top_module(statement: ast.stmt) -> str | None:
    """The top-level package an import statement imports from (its first name's, for `import a, b`)."""
    if isinstance(statement, ast.Import):
        return statement.names[0].name.split(".")[0]
    if isinstance(statement, ast.ImportFrom) and not statement.level and statement.module:
        return statement.module.split(".")[0]
    return None
