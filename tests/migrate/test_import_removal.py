"""Removing the names a rewrite released from an import statement (`remove_unused`) leaves code that parses
and imports exactly the names kept, whatever the statement's layout: parentheses, one name a line, trailing
commas, comments, backslashes, `;` (issue 30: FastChat's parenthesised import once came out as
`from m import name,`, which does not parse). Statements from hypothesmith, and statements laid out as the
public training repositories lay them out."""

from __future__ import annotations

import ast

import hypothesmith
import libcst as cst
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from portlayer.migrate.engine.analysis import ParsedText
from portlayer.migrate.engine.imports import remove_unused

NAMES = st.sampled_from(["flash_attn_func", "other", "GradScaler", "autocast", "a", "b"])
ALIASES = st.one_of(st.none(), st.sampled_from(["x", "y", "z"]))
# What may stand between two names of a parenthesised import, after its `(`, and before its `)`.
BETWEEN = st.sampled_from([" ", "\n    ", "  # note\n    ", "\n\n    ", "\n    # own line\n    "])
OPENING = st.sampled_from(["", "\n    ", "  # opening\n    "])
CLOSING = st.sampled_from(["", "\n", "  # closing\n", " "])
TAIL = st.sampled_from(["", "; import os", "  # tail", ";"])


@st.composite
def laid_out_imports(draw) -> str:
    names = draw(st.lists(st.tuples(NAMES, ALIASES), min_size=1, max_size=4,
                          unique_by=lambda pair: pair[1] or pair[0]))
    items = [name + (f" as {alias}" if alias else "") for name, alias in names]
    layout = draw(st.sampled_from(["parentheses", "plain", "backslash", "import"]))
    if layout == "import":
        return f"import {', '.join('m.' + item for item in items)}{draw(TAIL)}\n"
    if layout == "parentheses":
        body = "(" + draw(OPENING) + "".join(
            item + ("," + draw(BETWEEN) if i < len(items) - 1 else "") for i, item in enumerate(items))
        body += ("," if draw(st.booleans()) else "") + draw(CLOSING) + ")"
    else:
        body = (", \\\n    " if layout == "backslash" else ", ").join(items)
    return f"from m.n import {body}{draw(TAIL)}\n"


def specs(code: str) -> list[tuple[str, str | None, str | None]]:
    found = []
    for statement in ast.parse(code).body:
        if isinstance(statement, ast.Import):
            found += [(a.name, None, a.asname) for a in statement.names]
        elif isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
            found += [(statement.module, a.name, a.asname) for a in statement.names if a.name != "*"]
    return found


def assert_removal_parses(code: str, released_bits: int) -> None:
    """Release the imported names whose bit is set in `released_bits` (the first name is bit 0)."""
    try:
        ast.parse(code)
    except SyntaxError:
        assume(False)  # a layout Python does not accept (`(a  # c)` without a line break)
    released = {spec for i, spec in enumerate(specs(code)) if released_bits >> i & 1}
    removed, _ = remove_unused(ParsedText(code), released)
    ast.parse(removed)
    assert specs(removed) == [spec for spec in specs(code) if spec not in released]
    again, statements = remove_unused(ParsedText(removed), released)
    assert (again, statements) == (removed, 0)  # what is left has nothing more to remove


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(code=laid_out_imports(), released_bits=st.integers(0, 15))
# FastChat's llama2_flash_attn_monkey_patch.py, and the kept name first with comments on every line.
@example(code="from m.n import (\n    flash_attn_func,\n    other,\n)\n", released_bits=1)
@example(code="from m.n import (  # c\n    other,  # b\n    flash_attn_func,  # a\n)\n", released_bits=2)
def test_names_removed_from_an_import_laid_out_as_repositories_do_leave_code_that_parses(code, released_bits):
    assert_removal_parses(code, released_bits)


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))  # hypothesmith is slow
@given(code=hypothesmith.from_node(cst.ImportFrom) | hypothesmith.from_node(cst.Import),
       released_bits=st.integers(0, 2**16 - 1))
def test_names_removed_from_any_import_statement_leave_code_that_parses(code, released_bits):
    assert_removal_parses(code + "\n", released_bits)
