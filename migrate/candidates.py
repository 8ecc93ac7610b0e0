"""What the rules can fire on in a source: its names, attribute names, imported modules and string
literals, without its comments and docstrings. A rule whose TRIGGER matches none of it has nothing to
do, so most files that mention CUDA only in prose (most of transformers) never reach LibCST.

CPython's `ast` builds this in a few milliseconds, where LibCST's parse and scope analysis take a
second on a large module.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings

_STRING_TOKENS = {tokenize.STRING} | {getattr(tokenize, "FSTRING_START", tokenize.STRING)}


def parse_python(source: str) -> ast.Module:
    """`ast.parse`, without the SyntaxWarnings CPython prints about suspicious user code: the codemod
    reads code, it does not lint it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        return ast.parse(source)


def code_text(source: str) -> str | None:
    """The names and string literals of `source`, one a line; None when CPython cannot parse it
    (another Python version's syntax, or none at all: the caller must then look at everything)."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    # Lines as the parser counts them (str.splitlines also breaks at form feeds).
    lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+", source)
    words: list[str] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Expr) and _is_docstring(node, lines):
            # Its text is prose; an f-string's expressions are still code.
            if isinstance(node.value, ast.JoinedStr):
                stack.extend(part for part in node.value.values if isinstance(part, ast.FormattedValue))
            continue
        stack.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif isinstance(node, ast.alias):
            words.append(node.name)
            if node.asname:
                words.append(node.asname)
        elif isinstance(node, ast.ImportFrom) and node.module:
            words.append(node.module)
        elif isinstance(node, ast.keyword) and node.arg or isinstance(node, ast.arg):
            words.append(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            words.append(node.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            words.append(node.value)
    return "\n".join(words)


def _is_docstring(node: ast.Expr, lines: list[str]) -> bool:
    """A string standing alone as a statement, as the rules see it (LibCST: a string whose parent is
    an expression statement). An implicitly concatenated one is several strings: not a docstring."""
    value = node.value
    if not (
        isinstance(value, ast.JoinedStr) or (isinstance(value, ast.Constant) and isinstance(value.value, str))
    ):
        return False
    try:
        segment = _segment(value, lines)
        tokens = [
            t for t in tokenize.generate_tokens(io.StringIO(segment).readline) if t.type in _STRING_TOKENS
        ]
    except (tokenize.TokenError, SyntaxError, IndexError, UnicodeDecodeError):
        return False  # then its text counts as code: the safe side
    return len(tokens) == 1


def _segment(node: ast.expr, lines: list[str]) -> str:
    """The source text of `node` (its columns are UTF-8 byte offsets)."""
    first, last = lines[node.lineno - 1].encode(), lines[node.end_lineno - 1].encode()
    if node.lineno == node.end_lineno:
        return first[node.col_offset : node.end_col_offset].decode()
    middle = "".join(lines[node.lineno : node.end_lineno - 1])
    return first[node.col_offset :].decode() + middle + last[: node.end_col_offset].decode()
