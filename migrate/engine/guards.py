"""What the code already guards, found on CPython's tree of the whole file:

- branches that already dispatch per backend (mmengine's `if is_npu_available(): … elif
  is_mlu_available(): … else: torch.cuda.set_device(…)`): the whole `if` chain is left as it is, on
  purpose, and said so at info level (PL411, `portlayer.migrate.rules.dispatching`). A chain dispatches
  only when one of its tests names a backend the migrated program may run on (`served_backends`: the
  vendor target's own; for neutral and torch every accelerator of the backend records but cuda and mps):
  its CUDA branch is then one branch among others, and rewriting it would send that backend down the
  CUDA one's path. A CUDA/mps/cpu chain does not dispatch (mps is never a port's target): its CUDA
  branch is placement, and is rewritten (docs/migrate.md, "Meaning", rule 4);
- imports that are optional: under `try:` with an `except` that catches ImportError, or under an `if`
  (`if is_apex_available():`, `if torch.cuda.is_available():`). A CUDA-only library imported there
  is still reported, and the report says the import is optional, so the program's fallback runs
  without it.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from portlayer.backends import PROBE_ORDER
from portlayer.migrate.engine.facts import Fact
from portlayer.migrate.engine.import_statements import bound_names, catches_import_error
from portlayer.migrate.targets import Target, target_named

# Backends a port never targets: cuda is the source, and Apple's mps is not where CUDA code is moved.
_NEVER_SERVED = frozenset({"cuda", "mps"})
_CUDA = re.compile("cuda|nccl")
# What makes an import optional where it stands: a reason, the `if` whose test it depends on, or nothing.
Why = str | ast.If | None


@dataclass(frozen=True)
class DispatchChains:
    lines: frozenset[int] = frozenset()  # every line of each chain: no rule touches them
    # (line, column 1-based, the test that shows it) of each chain.
    sites: tuple[tuple[int, int, str], ...] = ()


@dataclass(frozen=True)
class OptionalImports:
    reasons: Mapping[int, str]  # the line of an import statement -> why it is optional
    # Names bound by the imports under an `if`: the program's own check decides whether they are used.
    checked_names: frozenset[str]


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


def find_dispatch_chains(tree: ast.Module, lines: list[str], target: Target) -> DispatchChains:
    """`lines`: the source's lines, with their endings; `target`: what the program is migrated to (a chain
    dispatches for some targets only)."""
    served = _naming_served_backend(target.name)
    if served.search("".join(lines).lower()) is None:
        return DispatchChains()
    chain_lines: set[int] = set()
    sites = []
    for node, _ in _statements(tree):
        if isinstance(node, ast.If) and node.lineno not in chain_lines and _dispatches(node, lines, served) and (
                _CUDA.search("".join(lines[node.lineno - 1 : node.end_lineno]).lower())):
            chain_lines.update(range(node.lineno, node.end_lineno + 1))
            sites.append((node.lineno, node.col_offset + 1, _segment(lines, node.test)))
    return DispatchChains(frozenset(chain_lines), tuple(sites))


def find_optional_imports(tree: ast.Module, lines: list[str]) -> OptionalImports:
    reasons: dict[int, str] = {}
    checked: set[str] = set()
    for node, why in _statements(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(why, ast.If):
                why = f"imported only if `{_segment(lines, why.test)}`"
                checked.update(bound_names(node))
            if why is not None:
                reasons[node.lineno] = why
    return OptionalImports(reasons, frozenset(checked))


def _statements(tree: ast.Module) -> Iterator[tuple[ast.AST, Why]]:
    """Every statement (and except clause), outer before inner, with what makes an import there optional."""
    stack: list[tuple[ast.AST, Why]] = [(tree, None)]
    while stack:
        node, why = stack.pop()
        if isinstance(node, ast.expr):
            continue  # no statement below
        yield node, why
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            stack.extend(reversed(_children(node, why)))


def _children(node: ast.AST, why: Why) -> list[tuple[ast.AST, Why]]:
    if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
        if any(catches_import_error(handler) for handler in node.handlers):
            return [(child, "imported under try/except ImportError") for child in node.body] + [
                (child, why) for part in (node.handlers, node.orelse, node.finalbody) for child in part]
    elif isinstance(node, ast.If):
        return [(child, node) for child in node.body + node.orelse]
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [(child, None) for child in ast.iter_child_nodes(node)]  # runs when called
    return [(child, why) for child in ast.iter_child_nodes(node)]


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


DISPATCH_CHAINS = Fact("the if chains that already dispatch per backend",
                       lambda file, facts: find_dispatch_chains(file.tree, file.lines, file.target))
OPTIONAL_IMPORTS = Fact("the imports that are optional",
                        lambda file, facts: find_optional_imports(file.tree, file.lines))
