"""CUDA-only library imports the program already has a fallback for, and the migration's way of
taking it: `try: import apex … except ImportError: <fallback>` becomes the fallback.

That is exactly what runs on a machine without the library: the statements of the `try` body before
the first library import, then the handler's body, then the `finally` body (the `else` body never
runs). Rewriting the CUDA branch's calls instead would leave the program two branches, one of them
dead; removing the branch's import keeps the program's own choice of portable code, which its authors
tested.

A handler that ends by raising is no fallback (the program needs the library; its uses are rewritten
where a rule can), and neither is one that binds the exception (`except ImportError as e:`), whose body
reads it. Both are left as they are.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from dataclasses import dataclass

from portlayer.migrate.engine.analysis import ParsedText, nested_bodies, source_lines
from portlayer.migrate.engine.import_statements import bound_names, catches_import_error, top_module


@dataclass(frozen=True)
class Fallback:
    statement: ast.Try
    handler: ast.ExceptHandler
    kept: tuple[ast.stmt, ...]  # the `try` body's statements before the first library import
    module: str  # the first library module the `try` body imports
    alone: bool  # the only statement of its block: something must stand in its place

    @property
    def lines(self) -> range:
        return range(self.statement.lineno, self.statement.end_lineno + 1)

    @property
    def bound_names(self) -> set[str]:
        """The names the `try` body's imports bind (they are unbound, or the fallback's, once taken)."""
        return {name for s in self.statement.body if isinstance(s, (ast.Import, ast.ImportFrom))
                for name in bound_names(s)}


def find_fallbacks(tree: ast.Module, libraries: Collection[str]) -> list[Fallback]:
    """Every `try` (at any depth) whose body imports one of `libraries` (top-level package names) and
    whose ImportError handler is a fallback, in source order."""
    found: list[Fallback] = []
    for body in [tree.body, *(body for _, body in nested_bodies(tree))]:
        for statement in body:
            if isinstance(statement, ast.Try):
                fallback = _fallback(statement, libraries, alone=len(body) == 1)
                if fallback is not None:
                    found.append(fallback)
    return sorted(found, key=lambda f: f.statement.lineno)


def _fallback(statement: ast.Try, libraries: Collection[str], alone: bool) -> Fallback | None:
    first = next((i for i, s in enumerate(statement.body) if top_module(s) in libraries), None)
    handler = next((h for h in statement.handlers if catches_import_error(h)), None)
    if first is None or handler is None or handler.name is not None or isinstance(handler.body[-1], ast.Raise):
        return None
    return Fallback(statement, handler, tuple(statement.body[:first]), top_module(statement.body[first]), alone)


@dataclass(frozen=True)
class FallbackChoice:
    """Which of a file's fallbacks give way: of those `find_fallbacks` finds for `libraries`, in source
    order, the ones `taken` says (the user may have excluded some)."""

    libraries: frozenset[str]
    taken: tuple[bool, ...]

    def take(self, text: ParsedText) -> tuple[str, int]:
        """The text (the migrated file) with the `try` statement of each fallback taken replaced by what
        runs without the library, and how many lines that moved out of their blocks."""
        lines = source_lines(text.code)
        fallbacks = find_fallbacks(text.tree, self.libraries)
        dedented = 0
        for fallback in reversed([f for f, take in zip(fallbacks, self.taken, strict=True) if take]):
            statement = fallback.statement
            indent = lines[statement.lineno - 1][: statement.col_offset]
            # Each part with the line of its clause's header (`try:`, `except …:`), whose comments below it go along.
            parts = [(fallback.kept, statement.lineno), (fallback.handler.body, fallback.handler.lineno),
                     (statement.finalbody, None)]
            replacement = "".join(_block(lines, list(part), indent, header) for part, header in parts
                                  if part and not _only_pass(part))
            dedented += len(source_lines(replacement))
            if not replacement and fallback.alone:
                replacement = f"{indent}pass{_ending(lines[statement.lineno - 1])}"
            # One entry per line still (the replaced ones empty), so the lines of an enclosing `try`, taken
            # next, keep their numbers, and its handler carries this replacement along.
            lines[statement.lineno - 1 : statement.end_lineno] = (
                [replacement] + [""] * (statement.end_lineno - statement.lineno))
        return "".join(lines), dedented


def _only_pass(statements) -> bool:
    return all(isinstance(s, ast.Pass) for s in statements)


def _ending(line: str) -> str:
    return line[len(line.rstrip("\r\n")):] or "\n"


def _block(lines: list[str], statements: list[ast.stmt], indent: str, header: int | None) -> str:
    """The source of `statements` (one suite), moved to `indent`, with the comment lines between its
    clause's `header` line and its first statement."""
    first, last = statements[0], statements[-1]
    head = lines[first.lineno - 1]
    if head[: first.col_offset].strip():  # `except ImportError: x = None` on one line
        text = head.encode()[first.col_offset:].decode() + "".join(lines[first.lineno : last.end_lineno])
        return indent + text.lstrip() + ("" if text.endswith(("\n", "\r")) else _ending(head))
    own = head[: len(head) - len(head.lstrip())]
    # Between the header's line and the first statement: the rest of a header split over lines, or comments.
    comments = [line for line in lines[header : first.lineno - 1] if line.lstrip().startswith("#")] if header else []
    moved = []
    for line in comments + source_lines("".join(lines[first.lineno - 1 : last.end_lineno])):
        moved.append(indent + line[len(own):] if line.startswith(own) else line)
    if not moved[-1].endswith(("\n", "\r")):
        moved[-1] += _ending(head)
    return "".join(moved)
