"""Statements a rule drops (liger's `apply_liger_kernel_to_llama()`, which patches the model with kernels a
backend lacks): the rule leaves `pass  # portlayer: dropped` where the statement stood, since it cannot
tell whether that empties the block, nor remove one of the top-level statements the engine splices back
into the file; once every rule has run, the marked statements go, or become a plain `pass` where the
block would otherwise be empty.
"""

from __future__ import annotations

import ast

from portlayer.migrate.engine.analysis import ParsedText, nested_bodies, newline_of, source_lines

DROPPED = "# portlayer: dropped"


def drop_marked(text: ParsedText) -> str:
    """The text without the statements a rule dropped; a plain `pass` stays where a block would be empty."""
    code, tree = text.code, text.tree
    lines = source_lines(code)
    edits: dict[int, str] = {}
    for body in [tree.body, *(body for _, body in nested_bodies(tree))]:
        marked = [s for s in body if isinstance(s, ast.Pass) and lines[s.lineno - 1].rstrip().endswith(DROPPED)]
        for index, statement in enumerate(marked):
            number = statement.lineno
            line = lines[number - 1]
            keep = body is not tree.body and len(marked) == len(body) and index == 0
            edits[number] = line[: statement.col_offset] + "pass" + newline_of(line) if keep else ""
            if not keep and 1 < number < len(lines) and not lines[number - 2].strip() and not lines[number].strip():
                edits[number - 1] = ""  # one blank line, not two, where the statement stood between them
    for number, replacement in edits.items():
        lines[number - 1] = replacement
    return "".join(lines)
