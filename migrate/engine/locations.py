"""Where each node of the rules' module is: its parent, and its position in the module as parsed.

A rule that rewrites one line into several (flash-attn's call into SDPA's) moves every later line of the
module the next rule sees; the positions the rules report and test exclusions against must still be
the file's. So positions are those of the tree as parsed: a node no rule has rebuilt has its own; a node
an earlier rule rebuilt has its place in the current tree, moved back by as many lines as its top-level
statement moved.

LibCST's providers compute both for every node before a visit: its ParentNodeProvider collects each
node's children through a visit that copies every node, and its PositionProvider prints the whole
module. Here the parents come from the nodes' fields, and each tree's positions from LibCST's printer
the first time one is asked for.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import libcst as cst
from libcst.metadata import CodePosition, MetadataWrapper, PositionProvider

from portlayer.migrate.engine.analysis import Span


class NodeLocations:
    """The locations in one version of the tree. `spans` are the file's lines of each top-level statement
    of the module (a piece of `portlayer.migrate.engine.snippets`), which no rule adds or removes."""

    def __init__(self, module: cst.Module, spans: Sequence[Span], first: NodeLocations | None = None):
        self.module = module
        self.spans = spans
        self.first = first or self  # the tree as parsed
        self._parents: dict[cst.CSTNode, cst.CSTNode] | None = None
        self._positions: dict[cst.CSTNode, CodePosition] | None = None
        self._indices: dict[cst.CSTNode, int] | None = None
        # What each name or attribute chain asked about refers to (`Rule.qualified`): it depends on
        # where the node is, so it holds for this version of the tree.
        self.referents: dict[cst.CSTNode, str | None] = {}

    def after(self, module: cst.Module) -> NodeLocations:
        """The locations in `module`, a rule's rewrite of this tree."""
        return NodeLocations(module, self.spans, self.first)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode:
        """Raises KeyError for the module, which has none, and for a node not in this tree."""
        if self._parents is None:
            self._parents = _parents_of(self.module)
        return self._parents[node]

    def file_lines(self, node: cst.CSTNode) -> range:
        """The file's lines of the top-level statement `node` is in: the only lines it can be on. Cheaper
        than its position, which prints the module."""
        first, last = self.spans[self._index(node)]
        return range(first, last + 1)

    def start(self, node: cst.CSTNode) -> CodePosition:
        """Where `node` starts, in the lines of the module as parsed."""
        parsed = self.first._starts().get(node)
        if parsed is not None:
            return parsed
        index = self._index(node)
        moved = self._starts()[self.module.body[index]].line - self.first._starts()[self.first.module.body[index]].line
        here = self._starts()[node]
        return CodePosition(here.line - moved, here.column)

    def _index(self, node: cst.CSTNode) -> int:
        """Which of the module's top-level statements `node` is in."""
        if self._indices is None:
            self._indices = {statement: index for index, statement in enumerate(self.module.body)}
        while node not in self._indices:
            node = self.parent(node)
        return self._indices[node]

    def _starts(self) -> dict[cst.CSTNode, CodePosition]:
        if self._positions is None:
            # The provider itself: MetadataWrapper.resolve also visits the whole module for the
            # batchable providers it was not asked for (libcst 1.9).
            ranges = PositionProvider()._gen(MetadataWrapper(self.module, unsafe_skip_copy=True))
            self._positions = {node: place.start for node, place in ranges.items()}
        return self._positions


def _parents_of(module: cst.Module) -> dict[cst.CSTNode, cst.CSTNode]:
    """Each node's parent, from the nodes' own fields: a LibCST visit, even a CSTVisitor's, builds a new
    copy of every node it passes."""
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        for name in _child_fields(type(node)):
            value = getattr(node, name)
            if isinstance(value, cst.CSTNode):
                parents[value] = node
                stack.append(value)
            elif isinstance(value, (tuple, list)):
                for item in value:
                    if isinstance(item, cst.CSTNode):
                        parents[item] = node
                        stack.append(item)
    return parents


@functools.cache
def _child_fields(kind: type) -> tuple[str, ...]:
    return tuple(field.name for field in dataclasses.fields(kind))
