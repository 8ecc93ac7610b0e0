"""`--annotate`: a `# portlayer: PLnnn message` comment above each statement with a diagnostic.

Idempotent: a statement that already carries the same comment gets no second one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

import libcst as cst
from libcst.metadata import PositionProvider

from portlayer.migrate.results import Diagnostic

Statement = cst.SimpleStatementLine | cst.BaseCompoundStatement


def comment_for(diagnostic: Diagnostic) -> str:
    return f"# portlayer: {diagnostic.code} {diagnostic.message}"


class Annotate(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(
        self, diagnostics: Sequence[Diagnostic], file_line: Callable[[int], int | None], lines: Sequence[str]
    ):
        super().__init__()
        # The module's lines are some of the file's `lines` (`portlayer.migrate.engine.snippets`): comments above its
        # statements may be in the file only.
        self.file_line = file_line
        self.lines = lines
        self.first_line: dict[Statement, int] = {}
        self.by_line: dict[int, list[Diagnostic]] = defaultdict(list)
        for diagnostic in diagnostics:
            self.by_line[diagnostic.line].append(diagnostic)
        # Each diagnostic line goes to the innermost statement whose first line(s) contain it.
        self.owner: dict[int, Statement] = {}

    def _claim(self, node: Statement, first: int, last: int) -> None:
        for line in map(self.file_line, range(first, last + 1)):
            if line in self.by_line:
                self.owner[line] = node

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            span = self.get_metadata(PositionProvider, node)
            self.first_line[node] = self.file_line(span.start.line) or 0
        if isinstance(node, cst.SimpleStatementLine):
            self._claim(node, span.start.line, span.end.line)
        elif isinstance(node, cst.BaseCompoundStatement):
            body_start = self.get_metadata(PositionProvider, node.body).start.line
            header_end = body_start - 1 if isinstance(node.body, cst.IndentedBlock) else body_start
            self._claim(node, span.start.line, max(span.start.line, header_end))
        return True

    def on_leave(self, original_node, updated_node):
        if isinstance(original_node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return self._annotated(original_node, updated_node)
        return updated_node

    def _annotated(self, original: Statement, updated: Statement) -> Statement:
        lines = sorted(line for line, owner in self.owner.items() if owner is original)
        if not lines:
            return updated
        present = {line.comment.value for line in updated.leading_lines if line.comment is not None}
        present.update(self._comments_above(self.first_line[original]))
        added = []
        for line in lines:
            for diagnostic in self.by_line[line]:
                text = comment_for(diagnostic)
                if text not in present:
                    present.add(text)
                    added.append(cst.EmptyLine(comment=cst.Comment(text)))
        return updated.with_changes(leading_lines=[*updated.leading_lines, *added])

    def _comments_above(self, line: int) -> set[str]:
        """The comments on the blank and comment lines right above the file's `line`."""
        comments = set()
        for text in reversed(self.lines[: max(line - 1, 0)]):
            text = text.strip()
            if text and not text.startswith("#"):
                break
            comments.add(text)
        return comments
