"""A LibCST node printed back to code: the one place that does it (messages, templates, import lines)."""

from __future__ import annotations

import libcst as cst

# Default settings (4 spaces, "\n"): what a node standing alone prints with.
_BARE = cst.Module([])


def code_of(node: cst.CSTNode) -> str:
    return _BARE.code_for_node(node)
