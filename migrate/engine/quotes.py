"""Strings a rule puts inside an f-string's braces take a quote that f-string does not use.

The targets' templates spell strings with double quotes (`torch.device("cpu")`). Before Python 3.12 the
quote of an f-string ends it wherever it appears, braces included, so a rewrite inside
`f"{torch.device(f'cuda:{i}')}"` (Megatron-LM's megatron_fsdp.py) gave code that only 3.12 parses; the
declared floor is 3.10. A string whose quote an enclosing f-string uses is written with the other quote;
where both are taken (an f-string inside an f-string), it is left as it is.
"""

from __future__ import annotations

import libcst as cst

from portlayer.migrate.engine.dispatch import OwnHooksTransformer

_QUOTES = ('"', "'")


class QuotesInsideFStrings(OwnHooksTransformer):
    def __init__(self) -> None:
        super().__init__()
        self.enclosing: list[str] = []  # the quote character of each f-string around the node

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self.enclosing.append(node.quote[0])

    def leave_FormattedString(self, original_node, updated_node):
        self.enclosing.pop()
        return updated_node

    def leave_SimpleString(self, original_node: cst.SimpleString, updated_node: cst.SimpleString):
        if not self.enclosing or updated_node.quote[0] not in self.enclosing or len(updated_node.quote) == 3:
            return updated_node
        free = next((quote for quote in _QUOTES if quote not in self.enclosing), None)
        body = updated_node.raw_value
        if free is None or free in body or "\\" in body:
            return updated_node  # no quote that keeps the value without escapes
        return updated_node.with_changes(value=f"{updated_node.prefix}{free}{body}{free}")
