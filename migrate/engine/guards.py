"""What the code already guards, found on CPython's tree of the whole file:

- branches that already dispatch per backend (mmengine's `if is_npu_available(): … elif
  is_mlu_available(): … else: torch.cuda.set_device(…)`): the whole `if` chain is left as it is, on
  purpose, and said so at info level (PL411). A chain dispatches only when one of its tests names a
  backend the migrated program may run on (`served_backends`: the vendor target's own; for neutral and
  torch every accelerator of the backend records but cuda and mps): its CUDA branch is then one branch
  among others, and rewriting it would send that backend down the CUDA one's path. A CUDA/mps/cpu chain
  does not dispatch (mps is never a port's target): its CUDA branch is placement, and is rewritten
  (docs/migrate.md, "Meaning", rule 4);
- imports that are optional: under `try:` with an `except` that catches ImportError, or under an `if`
  (`if is_apex_available():`, `if torch.cuda.is_available():`). A CUDA-only library imported there
  is still reported, and the report says the import is optional, so the program's fallback runs
  without it.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field

from portlayer.backends import PROBE_ORDER
from portlayer.migrate.codes import CODES
from portlayer.migrate.engine.import_statements import bound_names, catches_import_error
from portlayer.migrate.results import Diagnostic
from portlayer.migrate.targets import Target, target_named

# Backends a port never targets: cuda is the source, and Apple's mps is not where CUDA code is moved.
_NEVER_SERVED = frozenset({"cuda", "mps"})
_CUDA = re.compile("cuda|nccl")


@dataclass
class Guards:
    dispatch_lines: set[int] = field(default_factory=set)
    # (line, column 1-based, the test that shows it) of each dispatching `if` chain.
    dispatch_sites: list[tuple[int, int, str]] = field(default_factory=list)
    # line of an import statement -> why it is optional.
    optional_imports: dict[int, str] = field(default_factory=dict)
    # Names bound by the imports under an `if`: the program's own check decides whether they are used.
    checked_names: set[str] = field(default_factory=set)


def served_backends(target: Target) -> tuple[str, ...]:
    """The backends a program migrated to `target` may run on, cuda aside: a vendor target's own; for
    neutral and torch, every accelerator of the backend records but mps."""
    if target.is_vendor:
        return (target.vendor,)
    return tuple(backend.name for backend in PROBE_ORDER
                 if backend.is_accelerator and backend.name not in _NEVER_SERVED)


@functools.cache
def _naming_served_backend(target_name: str) -> re.Pattern:
    """A served backend named in lowered code, also inside identifiers (`is_npu_available`, `torch.npu`)."""
    served = served_backends(target_named(target_name))
    names = "|".join(re.escape(name) for name in sorted(served, key=len, reverse=True))
    return re.compile(rf"(?<![a-z])(?:{names})(?![a-z])")


def find_guards(tree: ast.Module, lines: list[str], target: Target, libraries: bool) -> Guards:
    """`lines`: the source's lines, with their endings; `target`: what the program is migrated to (a chain
    dispatches for some targets only); `libraries`: the code imports a CUDA-only library (optional imports
    are looked for only then)."""
    guards = Guards()
    served = _naming_served_backend(target.name)
    dispatching = served.search("".join(lines).lower()) is not None
    if not (dispatching or libraries):
        return guards
    # What makes an import optional: a reason, or the `if` whose test it depends on.
    stack: list[tuple[ast.AST, str | ast.If | None]] = [(tree, None)]
    while stack:
        node, why = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(why, ast.If):
                why = f"imported only if `{_segment(lines, why.test)}`"
                guards.checked_names.update(bound_names(node))
            if why is not None:
                guards.optional_imports[node.lineno] = why
            continue
        if isinstance(node, ast.expr):
            continue  # no statement below
        children = [(child, why) for child in ast.iter_child_nodes(node)]
        if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            if any(catches_import_error(handler) for handler in node.handlers):
                children = [(child, "imported under try/except ImportError") for child in node.body]
                children += [(child, why) for part in (node.handlers, node.orelse, node.finalbody)
                             for child in part]
        elif isinstance(node, ast.If):
            children = [(child, node) for child in node.body + node.orelse]
            if dispatching and node.lineno not in guards.dispatch_lines and _dispatches(node, lines, served) and (
                    _CUDA.search("".join(lines[node.lineno - 1 : node.end_lineno]).lower())):
                guards.dispatch_lines.update(range(node.lineno, node.end_lineno + 1))
                guards.dispatch_sites.append((node.lineno, node.col_offset + 1, _segment(lines, node.test)))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            children = [(child, None) for child in ast.iter_child_nodes(node)]  # runs when called
        stack.extend(reversed(children))
    return guards


def _segment(lines: list[str], node: ast.expr) -> str:
    """The source text of `node` (its columns are UTF-8 byte offsets), on one line."""
    if node.lineno == node.end_lineno:
        return lines[node.lineno - 1].encode()[node.col_offset : node.end_col_offset].decode(errors="replace")
    text = "".join(lines[node.lineno - 1 : node.end_lineno]).encode()
    end = len(text) - len(lines[node.end_lineno - 1].encode()) + node.end_col_offset
    return " ".join(text[node.col_offset : end].decode(errors="replace").split())


def _dispatches(node: ast.If, lines: list[str], served: re.Pattern) -> bool:
    """One of the chain's tests (`if`, each `elif`) names a backend the migrated program may run on."""
    while True:
        if served.search(_segment(lines, node.test).lower()):
            return True
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
        else:
            return False


def dispatch_diagnostics(guards: Guards, excluded: frozenset[int]) -> list[Diagnostic]:
    """PL411 at each dispatching chain the user has not excluded already."""
    title = CODES["PL411"].title
    return [Diagnostic.of("PL411", line, col, f"{title} (`if {test}`)")
            for line, col, test in guards.dispatch_sites if line not in excluded]
