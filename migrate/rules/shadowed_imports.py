"""`from torch.cuda... import X` in one branch of an `if` chain whose other branches import X from
other modules: mmengine's

    if is_npu_available():
        from torch.npu.amp import GradScaler
    elif is_mlu_available():
        from torch.mlu.amp import GradScaler
    else:
        from torch.cuda.amp import GradScaler

Which module a use of `GradScaler` reads is the program's choice at run time, so no rule can rewrite the
uses, nor the import. Where the program's own test names the target, the chain dispatches and is reported
as such (PL411); elsewhere (musa here) the CUDA branch is what runs on the target, a GradScaler that
disables itself without CUDA: said so (PL416), never left in silence.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict

from portlayer.migrate.engine.facts import Fact
from portlayer.migrate.engine.guards import DISPATCH_CHAINS
from portlayer.migrate.engine.import_statements import alias_binding
from portlayer.migrate.engine.regions import USER_EXCLUSIONS
from portlayer.migrate.rules.base import FileRule

_IMPORTS_FROM_TORCH_CUDA = re.compile(r"^[ \t]*from[ \t]+torch\.cuda\b", re.MULTILINE)


def shadowed_cuda_imports(tree: ast.Module, text: str) -> list[tuple[int, int, str, str, tuple[str, ...]]]:
    """(line, column 1-based, name, its torch.cuda module, the other modules binding it) of each name
    imported from torch.cuda in one branch of an `if` chain and from other modules in other branches.
    (A `try` that falls back to torch.cuda on ImportError is no such choice: the resolver takes its
    `try` body, and the uses are rewritten.)"""
    if _IMPORTS_FROM_TORCH_CUDA.search(text) is None:
        return []  # most files, told without walking the tree
    found = set()
    elifs: set[int] = set()  # ast.walk meets a chain's `if` before its `elif`s, which belong to it
    for node in ast.walk(tree):
        if not isinstance(node, ast.If) or id(node) in elifs:
            continue
        modules: dict[str, set[str]] = defaultdict(set)
        cuda_sites = []
        for branch in _branches(node, elifs):
            for statement in branch:
                if isinstance(statement, ast.ImportFrom) and not statement.level and statement.module:
                    for alias in statement.names:
                        name = alias_binding(statement, alias)
                        modules[name].add(statement.module)
                        if statement.module.split(".")[:2] == ["torch", "cuda"]:
                            cuda_sites.append((statement.lineno, statement.col_offset + 1, name, statement.module))
        found.update((line, col, name, module, tuple(sorted(modules[name] - {module})))
                     for line, col, name, module in cuda_sites if modules[name] - {module})
    return sorted(found)


def _branches(node: ast.If, elifs: set[int]) -> list[list[ast.stmt]]:
    """The bodies of an `if` chain: the `if`'s, each `elif`'s (noted in `elifs`), the `else`'s."""
    branches = [node.body]
    while len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        node = node.orelse[0]
        elifs.add(id(node))
        branches.append(node.body)
    return branches + [node.orelse]


SHADOWED_CUDA_IMPORTS = Fact("the names imported from torch.cuda that other imports bind too",
                             lambda file, facts: shadowed_cuda_imports(file.tree, file.text))


class ShadowedCudaImports(FileRule):
    NEEDS = (SHADOWED_CUDA_IMPORTS, DISPATCH_CHAINS, USER_EXCLUSIONS)

    def check(self) -> None:
        dispatching = self.fact(DISPATCH_CHAINS).lines  # reported as a chain already (PL411)
        excluded = self.fact(USER_EXCLUSIONS)
        for line, col, name, module, others in self.fact(SHADOWED_CUDA_IMPORTS):
            if line not in dispatching and line not in excluded:
                self.report_at("PL416", line, col, f"`{name}` from {module}, also imported from {', '.join(others)}: "
                               "left as is")
