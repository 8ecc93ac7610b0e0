"""The rules' parents and positions (`portlayer.migrate.engine.locations`) are LibCST's own, computed
more cheaply: checked against LibCST's providers on every golden input."""

import pathlib

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from portlayer.migrate.engine.analysis import analyse
from portlayer.migrate.engine.locations import NodeLocations
from portlayer.migrate.engine.snippets import Snippets

GOLDEN = pathlib.Path(__file__).parent / "golden"
INPUTS = sorted(GOLDEN.glob("*.in"))


def _snippet_module(path: pathlib.Path) -> tuple[cst.Module, list]:
    analysis = analyse(path.read_text(), None)  # every statement: the largest module the rules can see
    snippets = Snippets(analysis.lines, analysis.spans)
    return cst.parse_module(snippets.source), analysis.spans


@pytest.mark.parametrize("path", INPUTS, ids=lambda path: path.stem)
def test_parents_and_positions_are_libcsts(path):
    module, spans = _snippet_module(path)
    locations = NodeLocations(module, spans)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    parents, positions = wrapper.resolve(ParentNodeProvider), wrapper.resolve(PositionProvider)
    assert {node: locations.parent(node) for node in parents} == dict(parents)
    assert {node: locations.start(node) for node in positions} == {node: place.start for node, place in positions.items()}


def test_a_node_lies_within_its_top_level_statements_lines():
    module, spans = _snippet_module(GOLDEN / "amp.in")
    locations = NodeLocations(module, spans)
    for index, statement in enumerate(module.body):
        for node in [statement, *_descendants(statement)]:
            assert locations.file_lines(node) == range(spans[index][0], spans[index][1] + 1)


def _descendants(node: cst.CSTNode):
    for child in node.children:
        yield child
        yield from _descendants(child)
