"""Names the rewritten sites read, defined once in the module (the torch target's `DEVICE_TYPE`, whose
expression is too long to repeat at every site): `NAME = expression` lines below the imports."""

from __future__ import annotations

import ast

from portlayer.migrate.engine.analysis import ParsedText, newline_of, source_lines


def define(text: ParsedText, defined: dict[str, str]) -> str:
    """`NAME = expression` lines below the module-level `import torch` and the imports right after it,
    where a reader looks for what the module sets up."""
    code, body = text.code, text.tree.body
    # The last module-level `import torch[.x] [as y]` (`import os, torch` too): the expressions read the
    # name it binds.
    position = max(index for index, statement in enumerate(body) if isinstance(statement, ast.Import)
                   and any(alias.name.split(".")[0] == "torch" for alias in statement.names))
    while position + 1 < len(body) and isinstance(body[position + 1], (ast.Import, ast.ImportFrom)):
        position += 1
    after = body[position].end_lineno
    lines = source_lines(code)
    newline = newline_of(code)
    if after and not lines[after - 1].endswith(("\n", "\r")):
        lines[after - 1] += newline
    lines[after:after] = [f"{name} = {expression}{newline}" for name, expression in sorted(defined.items())]
    return "".join(lines)
