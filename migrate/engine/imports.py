"""The imports a migration needs, settled once every rule has run (`portlayer.migrate.engine.settle`):
the target's module added once (where isort puts it), and imports the rules' edits left unused removed.

Only module-level imports that a rule released are candidates for removal (and imports inside functions
and blocks from torch.cuda or a library a rule converted calls of), and a name counts as used if it
appears anywhere outside import statements (as a name or as a string, for `__all__`). Both work on the
migrated text: CPython's parse finds the statements, LibCST rewrites only an import statement that
loses names.

Not LibCST's AddImportsVisitor and RemoveImportsVisitor: they need the whole module parsed by LibCST,
with its scope metadata, where the engine parses only the statements the rules see (LibCST's parse of
a large module costs more than a second, CPython's milliseconds: bench/migrate_tree.py), and they put
an added import after the module's last import, where this puts it where isort (ruff's I001) would.
"""

from __future__ import annotations

import ast
import re
import sys
import unicodedata

import libcst as cst

from portlayer.migrate.engine.analysis import (
    ImportSpec,
    ParsedText,
    first_line,
    line_group,
    line_groups,
    nested_bodies,
    newline_of,
    source_lines,
)
from portlayer.migrate.engine.import_statements import alias_binding, top_module
from portlayer.migrate.engine.names import dotted

# An indented `from torch.cuda... import` or `import torch.cuda... as`.
_NESTED_TORCH_CUDA_IMPORT = re.compile(r"^[ \t]+(?:from|import)[ \t]+torch\.cuda", re.MULTILINE)


def missing_imports(tree: ast.Module, added: set[str]) -> list[str]:
    """The modules of `added` the module does not import as themselves at module level, in the order
    they are to be added."""
    plain = _plain_imports(tree)
    return [name for name in sorted(added, key=_rank) if name not in plain]


def _rank(name: str) -> tuple[bool, str]:
    # torch first: the other module a rule adds (portlayer, or the target's vendor plugin) imports it.
    return (name != "torch", name)


def bound_name(spec: ImportSpec) -> str:
    module, obj, alias = spec
    return alias or obj or module.split(".")[0]


def _used_names(tree: ast.Module) -> set[str]:
    """Every name outside import statements (read, bound or declared; not attribute or keyword names),
    and the first dotted part of every plain string."""
    used: set[str] = set()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.JoinedStr):  # an f-string's text is not a string literal of its own
            stack.extend(part for part in node.values if isinstance(part, ast.FormattedValue))
            continue
        stack.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            used.add(node.value.split(".")[0])
        elif isinstance(node, ast.arg):
            used.add(node.arg)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            used.update(node.names)
        else:
            name = getattr(node, "name", None) or getattr(node, "rest", None)
            if isinstance(name, str):  # def, class, except ... as, match captures
                used.add(name)
    return used


def remove_unused(text: ParsedText, released: set[ImportSpec]) -> tuple[str, int]:
    """The text without the module-level imports of `released` whose names nothing reads any more after
    the rewrite, and how many import statements that removed or narrowed."""
    code, tree = text.code, text.tree
    used = _used_names(tree)
    remover = _RemoveUnused(released, used)
    lines = source_lines(code)
    replaced: list[tuple[int, int, str]] = []
    for group in line_groups(tree.body):
        if any(isinstance(statement, (ast.Import, ast.ImportFrom)) for statement in group) and any(
            spec in released and bound_name(spec) not in used for spec in _specs(group)
        ):
            start, end = first_line(group[0]), group[-1].end_lineno
            module = cst.parse_module("".join(lines[start - 1 : end])).visit(remover)
            replaced.append((start, end, module.code if module.body else ""))
    for start, end, text in reversed(replaced):
        lines[start - 1 : end] = [text]
    return "".join(lines), len(replaced)


def remove_unused_nested(text: ParsedText, libraries: set[str]) -> tuple[str, int]:
    """Imports from torch.cuda (or from one of `libraries`) inside functions, classes and blocks
    (detectron2's function-level `from torch.cuda.amp import GradScaler`) whose names nothing reads any
    more after the rewrite: the names go, the statement too when none is left (`pass` where the block
    would be empty), and how many import statements that removed or narrowed."""
    code = text.code
    if not libraries and _NESTED_TORCH_CUDA_IMPORT.search(code) is None:
        return code, 0  # the common case, told without parsing or walking the tree
    candidates = [(scope, body, index) for scope, body in nested_bodies(text.tree) for index, statement in enumerate(body)
                  if (_imports_from_torch_cuda(statement) or top_module(statement) in libraries)
                  and line_group(body, index) == (index, index)]
    if not candidates:
        return code, 0
    used_in: dict[int, set[str]] = {}
    lines = source_lines(code)
    newline = newline_of(code)
    edits: list[tuple[int, int, str]] = []
    emptied: dict[int, int] = {}  # id(body) -> statements removed from it
    for scope, body, index in candidates:
        statement = body[index]
        # An import binds its names in its function (or class): only reads there can use them.
        used = used_in.setdefault(id(scope), _used_names(scope))
        kept = [alias for alias in statement.names if alias_binding(statement, alias) in used]
        if len(kept) == len(statement.names):
            continue
        indent = lines[statement.lineno - 1][: statement.col_offset]
        text = ""
        if kept:
            statement = type(statement)(**{**vars(statement), "names": kept})
            text = indent + ast.unparse(statement) + newline
        else:
            emptied[id(body)] = emptied.get(id(body), 0) + 1
            if emptied[id(body)] == len(body):
                text = indent + "pass" + newline  # the block's last statement: keep it a block
        edits.append((statement.lineno, body[index].end_lineno, text))
    for start, end, text in sorted(edits, reverse=True):
        lines[start - 1 : end] = [text]
    return "".join(lines), len(edits)


def _imports_from_torch_cuda(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.ImportFrom):
        module = statement.module or ""
        return not statement.level and (module == "torch.cuda" or module.startswith("torch.cuda."))
    return isinstance(statement, ast.Import) and all(
        alias.asname and alias.name.startswith("torch.cuda") for alias in statement.names)


def _specs(statements: list[ast.stmt]):
    for statement in statements:
        if isinstance(statement, ast.Import):
            yield from ((alias.name, None, alias.asname) for alias in statement.names)
        elif isinstance(statement, ast.ImportFrom) and not statement.level and statement.module:
            yield from ((statement.module, alias.name, alias.asname) for alias in statement.names)


class _RemoveUnused(cst.CSTTransformer):
    def __init__(self, released: set[ImportSpec], used: set[str]):
        super().__init__()
        self.released, self.used = released, used

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> bool:
        return False  # module-level imports only

    def _keep(self, spec: ImportSpec) -> bool:
        if not all(part is None or part.isascii() for part in spec):
            # LibCST keeps a name as written, CPython (whose names the specs are) normalised (NFKC).
            spec = tuple(part and unicodedata.normalize("NFKC", part) for part in spec)
        return spec not in self.released or bound_name(spec) in self.used

    def leave_Import(self, original_node, updated_node):
        names = [a for a in updated_node.names if self._keep((dotted(a.name), None, a.evaluated_alias))]
        return self._with_names(updated_node, names)

    def leave_ImportFrom(self, original_node, updated_node):
        if isinstance(updated_node.names, cst.ImportStar) or updated_node.relative or updated_node.module is None:
            return updated_node
        module = dotted(updated_node.module)
        names = [a for a in updated_node.names if self._keep((module, dotted(a.name), a.evaluated_alias))]
        return self._with_names(updated_node, names)

    @staticmethod
    def _with_names(node, names):
        if not names:
            return cst.RemoveFromParent()
        if len(names) == len(node.names):
            return node
        if isinstance(node, cst.ImportFrom) and node.rpar is not None and _spans_lines(node):
            return _kept_in_parentheses(node, names)
        # One line (`import a, b`, `from m import (a, b,)`): the last name kept takes no comma, and a
        # single name no parentheses.
        names[-1] = names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        changes = {"names": names}
        if isinstance(node, cst.ImportFrom) and node.rpar is not None and len(names) == 1:
            changes.update(lpar=None, rpar=None)
        return node.with_changes(**changes)


def _spans_lines(node: cst.ImportFrom) -> bool:
    return "\n" in cst.Module(body=[]).code_for_node(node)


def _kept_in_parentheses(node: cst.ImportFrom, names: list[cst.ImportAlias]) -> cst.ImportFrom:
    """A parenthesised import over several lines keeps its parentheses, each kept name its own line and
    comment, and the closing parenthesis where it was: the last name kept ends its line as the original
    last name did (a trailing comma, then the indentation of the `)` line). A comma ends the line of a
    name that had one: `from m import (a  # c)` would put the parenthesis in the comment."""
    last = names[-1]
    if last is node.names[-1]:
        return node.with_changes(names=names)
    own = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else None
    original = node.names[-1].comma
    closing = original.whitespace_after if isinstance(original, cst.Comma) else node.rpar.whitespace_before
    rpar = node.rpar
    if isinstance(own, cst.ParenthesizedWhitespace):
        last_line = closing.last_line if isinstance(closing, cst.ParenthesizedWhitespace) else own.last_line
        names[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=own.with_changes(last_line=last_line)))
        if not isinstance(original, cst.Comma):
            rpar = rpar.with_changes(whitespace_before=cst.SimpleWhitespace(""))
    elif isinstance(original, cst.Comma):
        names[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=closing))
    else:
        names[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return node.with_changes(names=names, rpar=rpar)


def _plain_imports(tree: ast.Module) -> set[str]:
    """Modules imported as themselves at module level (`import torch_npu`, not `import x as y`)."""
    return {
        alias.name
        for statement in tree.body
        if isinstance(statement, ast.Import)
        for alias in statement.names
        if alias.asname is None
    }


def insert_imports(text: ParsedText, modules: list[str]) -> str:
    """`import module` lines where isort (ruff's I001) puts them: in the third-party block that imports
    torch, among its `import x` lines in alphabetical order; without such a block, after the docstring
    and the imports that open the module (before its first statement if it opens with neither), set off
    by a blank line from the code that follows."""
    code = text.code
    groups = line_groups(text.tree.body)
    block = _torch_block(groups)
    if block is not None:
        return _insert_sorted(code, block, modules)
    at = 1 if groups and _is_docstring(groups[0]) else 0
    position = at
    while position < len(groups) and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in groups[position]):
        position += 1
    lines = source_lines(code)
    newline = newline_of(code)
    added = "".join(f"import {module}{newline}" for module in modules)
    if position == 0:
        at_line = first_line(groups[0][0]) if groups else len(lines) + 1
        # Above the blank lines that precede the statement (left, say, by a removed import), so that
        # they still separate it from the import; below the first of them when comments come before.
        start = at_line
        while start > 1 and not lines[start - 2].strip():
            start -= 1
        if start < at_line:
            at_line = start + 1 if start > 1 else start
        return "".join(lines[: at_line - 1]) + added + "".join(lines[at_line - 1 :])
    after = groups[position - 1][-1].end_lineno
    before = "".join(lines[:after])
    if before and not before.endswith(("\n", "\r")):
        before += newline
    if position < len(groups) and first_line(groups[position][0]) == after + 1:
        added += newline  # the code right below gets a blank line between it and the imports
    return before + added + "".join(lines[after:])


def _is_docstring(group: list[ast.stmt]) -> bool:
    return (
        len(group) == 1
        and isinstance(group[0], ast.Expr)
        and isinstance(group[0].value, ast.Constant)
        and isinstance(group[0].value.value, str)
    )


def _torch_block(groups: list[list[ast.stmt]]) -> list[ast.stmt] | None:
    """The run of import statements, one a line with nothing between them, that has a torch import."""
    blocks: list[list[ast.stmt]] = []
    for group in groups:
        if len(group) != 1 or not isinstance(group[0], (ast.Import, ast.ImportFrom)):
            if group and not _is_docstring(group):
                break  # only the imports that open the module
            continue
        statement = group[0]
        if blocks and blocks[-1][-1].end_lineno + 1 == statement.lineno:
            blocks[-1].append(statement)
        else:
            blocks.append([statement])
    return next((block for block in blocks if any(top_module(s) == "torch" for s in block)), None)


def _insert_sorted(code: str, block: list[ast.stmt], modules: list[str]) -> str:
    """Each `import module` before the first `import x` of `block` that sorts after it, else after the
    block's last `import x` (isort puts `import x` lines before `from x import y` ones)."""
    lines = source_lines(code)
    newline = newline_of(code)
    plain = [s for s in block if isinstance(s, ast.Import)]
    names = [s.names[0].name.lower() for s in plain]
    at: dict[int, list[str]] = {}
    if names != sorted(names):
        # No order to keep: with the third-party imports, after the last one (alphabetically, `portlayer`
        # would land among the standard library in `import os / import math / import time / import torch`).
        third_party = [s for s in block if (m := top_module(s)) is not None and m not in sys.stdlib_module_names]
        at[third_party[-1].end_lineno + 1] = [f"import {module}{newline}" for module in modules]
        modules = []
    for module in modules:
        after = next((s for s in plain if s.names[0].name.lower() > module.lower()), None)
        if after is not None:
            line = after.lineno
        elif plain:
            line = plain[-1].end_lineno + 1
        else:
            line = block[0].lineno
        at.setdefault(line, []).append(f"import {module}{newline}")
    for line in sorted(at, reverse=True):
        if line - 2 >= 0 and line - 2 < len(lines) and not lines[line - 2].endswith(("\n", "\r")):
            lines[line - 2] += newline
        lines[line - 1:line - 1] = at[line]
    return "".join(lines)
