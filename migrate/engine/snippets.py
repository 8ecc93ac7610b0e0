"""The lines the rules must see, as one LibCST module, and the way back into the file.

Each span of lines (whole statements, from `portlayer.migrate.engine.analysis`) becomes one top-level statement of a
synthetic module: as is when it starts at column 0, else under an `if True:` header, which keeps every
column of the original lines. Lines map back to the file's, and the printed statements replace their
spans; every other byte of the file is left as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from portlayer.migrate.engine.analysis import Span, newline_of

_HEADER = "if True:"


@dataclass(frozen=True)
class _Piece:
    span: Span
    header: str  # the `if True:` line put before an indented span, "" for none
    added_newline: str  # the newline put after a span that ends the file without one


class Snippets:
    def __init__(self, lines: Sequence[str], spans: Sequence[Span]):
        self.lines = lines
        self.pieces: list[_Piece] = []
        # (first synthetic line of a piece's own lines, its first file line), in order.
        self._starts: list[tuple[int, int]] = []
        parts: list[str] = []
        synthetic_line = 1
        for first, last in spans:
            text = "".join(lines[first - 1 : last])
            newline = newline_of(lines[first - 1])
            header = f"{_HEADER}{newline}" if text[:1] in (" ", "\t", "\f") else ""
            added = "" if text.endswith(("\n", "\r")) else newline
            self.pieces.append(_Piece((first, last), header, added))
            if header:
                synthetic_line += 1
            self._starts.append((synthetic_line, first))
            parts += [header, text, added]
            synthetic_line += last - first + 1
        self.source = "".join(parts)

    def file_line(self, synthetic_line: int) -> int | None:
        """The file's line for a line of the synthetic module; None for an added `if True:` line."""
        for (start, first), piece in zip(reversed(self._starts), reversed(self.pieces)):
            if synthetic_line >= start:
                line = first + synthetic_line - start
                return line if line <= piece.span[1] else None
        return None

    def splice(self, module: cst.Module) -> str:
        """The file's text with each span replaced by the printed statement that stands for it."""
        if len(module.body) != len(self.pieces):
            raise AssertionError("a rule added or removed a top-level statement of the synthetic module")
        out: list[str] = []
        line = 1
        for piece, statement in zip(self.pieces, module.body):
            first, last = piece.span
            out += self.lines[line - 1 : first - 1]
            text = module.code_for_node(statement)
            if piece.header:
                if not text.startswith(piece.header):
                    raise AssertionError("the `if True:` line of an indented span was changed")
                text = text[len(piece.header) :]
            if piece.added_newline and text.endswith(piece.added_newline):
                text = text[: -len(piece.added_newline)]
            out.append(text)
            line = last + 1
        out += self.lines[line - 1 :]
        return "".join(out)
