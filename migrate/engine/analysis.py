"""One walk over CPython's `ast` of a module: its scopes (`portlayer.migrate.engine.scopes`), its module-level imports, and
the statements the rules must see.

A statement must be seen when its code (comments and docstrings aside) has a word a rule's TRIGGER
matches, or reads a name that an import with such a word binds (`DDP(...)` after `from
torch.nn.parallel import DistributedDataParallel as DDP`). Each is widened to the smallest run of
whole lines that parses on its own (`elif` and `else: x` clauses widen to their `if`, statements
sharing a line with `;` go together), and only those lines reach LibCST: its parse and metadata cost
more than a second on a large module, CPython's parse and this walk a few milliseconds.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from itertools import accumulate

from portlayer.migrate.engine.scopes import Position, Scope
from portlayer.migrate.engine.triggers import Trigger, occurrences

# An import as (module, imported name or None, alias or None): `from a.b import c as d` is
# ("a.b", "c", "d"), `import a.b` is ("a.b", None, None).
ImportSpec = tuple[str, "str | None", "str | None"]
Span = tuple[int, int]  # first and last line, 1-based, inclusive

_STRING_TOKENS = {tokenize.STRING} | {getattr(tokenize, "FSTRING_START", tokenize.STRING)}
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_DEFINITIONS = _FUNCTIONS + (ast.ClassDef,)
# Statements that, without a rule's word, are only looked at for what they bind (a definition its name,
# an assignment its targets) until an alias read on their lines calls for a closer look.
_DEFERRABLE = _DEFINITIONS + (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return)
# A walrus binds where the statement stands, in a definition's defaults and decorators too, wherever in
# its value it is: a statement with one on its lines is read closely.
_BINDS_OUTSIDE = ":="
# `from torch.cuda import *` hides which names are torch's: a module with one is looked at whole.
STAR_MODULES = ("torch.cuda", "torch.cuda.amp")


def parse_python(source: str) -> ast.Module:
    """`ast.parse`, without the SyntaxWarnings CPython prints about suspicious user code: the codemod
    reads code, it does not lint it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        return ast.parse(source)


class ParsedText:
    """A module's text and CPython's tree of it, parsed the first time it is asked for: the edits made
    after the rules (`portlayer.migrate.engine.settle`) read the tree of the text each is given, and most
    leave that text as it was."""

    def __init__(self, code: str):
        self.code = code
        self._tree: ast.Module | None = None

    @property
    def tree(self) -> ast.Module:
        if self._tree is None:
            self._tree = parse_python(self.code)
        return self._tree

    def replace(self, code: str) -> None:
        if code != self.code:
            self.code, self._tree = code, None


def source_lines(source: str) -> list[str]:
    """Lines as the parser counts them, with their endings (str.splitlines also breaks at form feeds)."""
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+", source)


def newline_of(text: str) -> str:
    """The first line ending in `text` ("\n" if it has none): what LibCST takes as the module's."""
    match = re.search(r"\r\n|\r|\n", text)
    return match.group() if match else "\n"


@dataclass
class ModuleImports:
    """The module-level imports (statements directly in the module's body), as the rules need them."""

    by_name: dict[str, list[ImportSpec]] = field(default_factory=dict)
    torch_alias: str | None = None  # what `import torch [as th]` binds; "torch" after `import torch.x`
    star_modules: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, tree: ast.Module) -> ModuleImports:
        facts = cls()
        for statement in tree.body:
            if isinstance(statement, ast.Import):
                for alias in statement.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    facts.by_name.setdefault(bound, []).append((alias.name, None, alias.asname))
                    if alias.name == "torch" and facts.torch_alias is None:
                        facts.torch_alias = bound
                    elif alias.asname is None and alias.name.startswith("torch."):
                        facts.torch_alias = facts.torch_alias or "torch"
            elif isinstance(statement, ast.ImportFrom) and not statement.level and statement.module:
                for alias in statement.names:
                    if alias.name == "*":
                        if statement.module in STAR_MODULES:
                            facts.star_modules.add(statement.module)
                        continue
                    bound = alias.asname or alias.name
                    facts.by_name.setdefault(bound, []).append((statement.module, alias.name, alias.asname))
        return facts


@dataclass
class Analysis:
    lines: list[str]
    scopes: Scope
    imports: ModuleImports
    spans: list[Span]  # disjoint, in order: the lines the rules must see
    words: str  # the code's words that a trigger matched, one a line (which rules can fire)
    tree: ast.Module
    # The top-level packages imported (absolutely) anywhere the walk read closely, which includes every
    # import of a package whose name is a trigger word.
    packages: frozenset[str] = frozenset()
    # For each span, the words that made its statements interesting, one a line: a rule is shown the span
    # only if its trigger matches them. None: shown to every rule the file calls for (a statement that
    # reads an alias, or every statement of a module seen whole).
    span_words: list[str | None] = field(default_factory=list)


def analyse(source: str, trigger: Trigger | None) -> Analysis:
    """Raises SyntaxError (or ValueError, RecursionError) when CPython cannot parse `source`. With no
    `trigger`, every statement is to be seen."""
    tree = parse_python(source)
    imports = ModuleImports.of(tree)
    walk = _Walk(source_lines(source), trigger)
    # A star import of torch.cuda may hide a name anywhere: then every statement is seen, and every
    # definition read closely.
    walk.run(tree, None if trigger is None or imports.star_modules else source)
    if trigger is None or imports.star_modules & walk.hot_star_modules:
        spans = walk.whole_module(tree)
        span_words: list[str | None] = [None] * len(spans)
    else:
        spans, span_words = walk.spans()
    return Analysis(walk.lines, walk.module_scope, imports, spans, "\n".join(walk.words), tree,
                    frozenset(walk.packages), span_words)


class _Walk:
    """Most of a large module is functions, classes and assignments that have none of the rules' words:
    such a statement is only looked at for what it binds where it stands, and read closely later only
    if it reads a name that an import with such a word binds. Nothing in it can be a statement the
    rules must see, and its own scopes are only ever asked about names in those statements."""

    def __init__(self, lines: list[str], trigger: Trigger | None):
        self.lines = lines
        self.trigger = trigger
        self._matched: dict[str, bool] = {}
        self.words: list[str] = []
        self.hot: set[ast.stmt] = set()
        self.words_of: dict[ast.stmt, list[str]] = {}  # of each hot statement
        self.alias_readers: set[ast.stmt] = set()
        self.hot_star_modules: set[str] = set()
        self.packages: set[str] = set()
        # Names bound by imports that have a trigger word, and which statements read which name.
        self.hot_aliases: set[str] = set()
        self.readers: dict[str, list[ast.stmt]] = {}
        self.parent: dict[ast.stmt, ast.stmt | None] = {}
        self.siblings: dict[ast.stmt, tuple[list[ast.stmt], int]] = {}
        self.module_scope = Scope("module", (1, 0), (len(lines) + 1, 0))
        # The lines a deferrable statement must hold one of to be read closely (sorted); None: all are.
        self._close_lines: list[int] | None = None
        self._deferred: list[tuple[ast.AST, Scope, ast.stmt | None]] = []

    # -- the walk -----------------------------------------------------------------------------------

    def run(self, tree: ast.Module, source: str | None = None) -> None:
        """With `source`, statements without a rule's word on their lines are deferred (`_DEFERRABLE`)."""
        offsets = None if source is None else self.trigger.offsets(source)
        if offsets is not None:
            offsets += occurrences(source, _BINDS_OUTSIDE)
            self._close_lines = self._line_numbers(offsets)
        self._statements(tree.body, None)
        self._walk([(tree, self.module_scope, None)])
        if self._deferred:
            # No import in them has a rule's word, so every name such an import binds is known now.
            readers = self._line_numbers([at for name in self.hot_aliases for at in occurrences(source, name)])
            self._close_lines = None
            self._walk([item for item in self._deferred if _holds_a_line(item[0], readers)])
        self._sort(self.module_scope)
        for name in self.hot_aliases:
            self.alias_readers.update(self.readers.get(name, ()))
        self.hot |= self.alias_readers

    def _line_numbers(self, offsets: list[int]) -> list[int]:
        ends = list(accumulate(map(len, self.lines)))
        return sorted({bisect_right(ends, at) + 1 for at in offsets})

    def _walk(self, stack: list[tuple[ast.AST, Scope, ast.stmt | None]]) -> None:
        while stack:
            node, scope, statement = stack.pop()
            if isinstance(node, _DEFERRABLE) and self._close_lines is not None and not _holds_a_line(node, self._close_lines):
                self._defer(node, scope, statement)
                continue
            if isinstance(node, ast.stmt):
                statement = node
                for _, value in ast.iter_fields(node):
                    if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                        self._statements(value, node)
                if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                    for handler in node.handlers:
                        self._statements(handler.body, node)
                elif type(node).__name__ == "Match":
                    for case in node.cases:
                        self._statements(case.body, node)
            children = self._enter(node, scope, statement)
            if children is None:
                children = [(child, scope) for child in ast.iter_child_nodes(node)]
            stack.extend((child, child_scope, statement) for child, child_scope in reversed(children))

    def _defer(self, node: ast.stmt, scope: Scope, statement: ast.stmt | None) -> None:
        """Bind what `node` binds where it stands; it is read closely later if it reads an alias."""
        self._deferred.append((node, scope, statement))
        if isinstance(node, _DEFINITIONS):
            scope.bind(node.name)
        elif isinstance(node, ast.Assign):
            self._walk([(target, scope, node) for target in node.targets])
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            self._walk([(node.target, scope, node)])

    def _statements(self, body: list[ast.stmt], parent: ast.stmt | None) -> None:
        for index, statement in enumerate(body):
            self.parent[statement] = parent
            self.siblings[statement] = (body, index)

    def _enter(self, node: ast.AST, scope: Scope, statement: ast.stmt | None):
        """Record what `node` binds, reads and says; return its children with the scope each is in, or
        None for all of them in `scope`."""
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                self.readers.setdefault(node.id, []).append(statement)
            else:
                scope.bind(node.id)
            self._word(node.id, statement)
        elif isinstance(node, ast.Attribute):
            self._word(node.attr, statement)
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                self._word(node.value, statement)
        elif isinstance(node, ast.keyword):
            if node.arg:
                self._word(node.arg, statement)
        elif isinstance(node, ast.Expr):
            return self._expression_statement(node, scope)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self._import(node, scope, statement)
        elif isinstance(node, _FUNCTIONS + (ast.Lambda,)):
            return self._function(node, scope)
        elif isinstance(node, ast.ClassDef):
            scope.bind(node.name)
            around = self._type_parameters(node, scope)
            body = around.child("class", self._start(node.body[0]), self._end(node))
            return (
                [(child, scope) for child in node.decorator_list]
                + [(child, around) for child in [*node.bases, *node.keywords]]
                + [(child, body) for child in node.body]
                + self._bounds(node, around)
            )
        elif type(node).__name__ == "TypeAlias":  # `type X[T] = ...` (3.12): the value is read lazily
            scope.bind(node.name.id)
            around = self._type_parameters(node, scope, start=node.value)
            return [(node.value, around)] + self._bounds(node, around)
        elif isinstance(node, _COMPREHENSIONS):
            inner = scope.child("comprehension", self._start(node), self._end(node))
            # The first iterable is evaluated where the comprehension stands, not inside it.
            first = node.generators[0]
            iterable = self._outside(first.iter, inner, scope)
            inside = [(child, inner) for child in ast.iter_child_nodes(node) if child is not first]
            return inside + [(first.target, inner), (first.iter, iterable)] + [(test, inner) for test in first.ifs]
        elif isinstance(node, ast.NamedExpr):
            scope.function.bind(node.target.id)
            return [(node.value, scope)]
        elif isinstance(node, ast.Global):
            scope.declared_global.update(node.names)
        elif isinstance(node, ast.Nonlocal):
            scope.declared_nonlocal.update(node.names)
        elif isinstance(node, ast.ExceptHandler):
            if node.name:
                scope.bind(node.name)
        elif type(node).__name__ in ("MatchAs", "MatchStar") and node.name:
            scope.bind(node.name)
        elif type(node).__name__ == "MatchMapping" and node.rest:
            scope.bind(node.rest)
        return None

    def _expression_statement(self, node: ast.Expr, scope: Scope):
        """A docstring's text is prose, not code; an f-string's expressions are still code."""
        value = node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            if self._matches(value.value) and not self._is_docstring(value):
                self._word(value.value, node)
            return []
        if isinstance(value, ast.JoinedStr) and self._is_docstring(value):
            return [(part, scope) for part in value.values if isinstance(part, ast.FormattedValue)]
        return None

    def _import(self, node: ast.Import | ast.ImportFrom, scope: Scope, statement: ast.stmt) -> None:
        module = node.module if isinstance(node, ast.ImportFrom) else None
        relative = isinstance(node, ast.ImportFrom) and (node.level or not node.module)
        if isinstance(node, ast.Import):
            self.packages.update(alias.name.split(".")[0] for alias in node.names)
        elif not relative:
            self.packages.add(module.split(".")[0])
        hot_module = module is not None and self._word(module, statement)
        for alias in node.names:
            # A name is the rules' business if it or the module it comes from has a trigger word.
            hot = self._word(alias.name, statement) | bool(alias.asname and self._word(alias.asname, statement))
            hot |= hot_module
            if alias.name == "*":
                if hot and module is not None:
                    self.hot_star_modules.add(module)
                continue
            if isinstance(node, ast.Import):
                bound = alias.asname or alias.name.split(".")[0]
                imported = alias.name if alias.asname else bound
            else:
                bound = alias.asname or alias.name
                imported = None if relative else f"{module}.{alias.name}"
            if imported is None:
                scope.bind(bound)
            else:
                scope.bind_import(bound, imported)
            # `import torch.cuda` binds `torch`, whose reads spell out the rest (`torch.cuda.x`).
            if hot and (alias.asname or not isinstance(node, ast.Import) or self._matches(bound)):
                self.hot_aliases.add(bound)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, scope: Scope):
        arguments = node.args
        parameters = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        parameters += [arg for arg in (arguments.vararg, arguments.kwarg) if arg is not None]
        # Decorators and defaults are evaluated where the function is defined; annotations too, or in
        # the scope of its type parameters when it has some.
        defaults = [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]
        annotations = [arg.annotation for arg in parameters if arg.annotation is not None]
        if isinstance(node, ast.Lambda):
            body, decorators, around = [node.body], [], scope
        else:
            scope.bind(node.name)
            annotations += [node.returns] if node.returns else []
            body, decorators = node.body, node.decorator_list
            around = self._type_parameters(node, scope)
        inner = around.child("function", self._start(body[0]), self._end(node))
        for arg in parameters:
            inner.bind(arg.arg)
        if around is not scope:  # defaults sit inside the type parameters' span but are read outside it
            defaults = [(default, self._outside(default, around, scope)) for default in defaults]
        else:
            defaults = [(default, scope) for default in defaults]
        return (
            [(child, scope) for child in decorators]
            + defaults
            + [(child, around) for child in annotations]
            + [(child, inner) for child in body]
            + self._bounds(node, around)
        )

    def _type_parameters(self, node: ast.AST, scope: Scope, start: ast.AST | None = None) -> Scope:
        """The annotation scope PEP 695's type parameters (`def f[T]`, `class C[T]`, `type X[T] = …`,
        Python 3.12) open between `scope` and the definition, binding them; `scope` when there are none.
        On an older Python such code does not parse at all (PL901, naming the grammar that judged it)."""
        parameters = getattr(node, "type_params", None)
        if not parameters:
            if start is None:
                return scope
            parameters = []
        first = parameters[0] if parameters else start
        around = scope.child("annotation", self._start(first), self._end(node))
        for parameter in parameters:
            around.bind(parameter.name)
        return around

    def _bounds(self, node: ast.AST, around: Scope) -> list[tuple[ast.AST, Scope]]:
        """A type parameter's bound, constraints and default, read in the annotation scope."""
        expressions = []
        for parameter in getattr(node, "type_params", None) or ():
            expressions += [getattr(parameter, field, None) for field in ("bound", "default_value")]
        return [(expression, around) for expression in expressions if expression is not None]

    def _outside(self, expression: ast.AST, inner: Scope, outer: Scope) -> Scope:
        """A piece of `inner`'s span that is read in `outer` (a default value of a generic function)."""
        piece = inner.child("iterable", self._start(expression), self._end(expression))
        piece.parent = outer
        return piece

    def _word(self, word: str, statement: ast.stmt | None) -> bool:
        if statement is None or not self._matches(word):
            return False
        self.words.append(word)
        self.words_of.setdefault(statement, []).append(word)
        self.hot.add(statement)
        return True

    def _matches(self, word: str) -> bool:
        matched = self._matched.get(word)
        if matched is None:
            matched = self._matched[word] = self.trigger is not None and self.trigger.search(word) is not None
        return matched

    # -- positions ----------------------------------------------------------------------------------

    def _start(self, node: ast.AST) -> Position:
        return self._position(node.lineno, node.col_offset)

    def _end(self, node: ast.AST) -> Position:
        return self._position(node.end_lineno, node.end_col_offset)

    def _position(self, line: int, byte_column: int) -> Position:
        """An ast position (UTF-8 byte column) as LibCST counts it (character column)."""
        text = self.lines[line - 1] if line <= len(self.lines) else ""
        if text.isascii():
            return line, byte_column
        return line, len(text.encode()[:byte_column].decode(errors="replace"))

    def _sort(self, scope: Scope) -> None:
        scope.children.sort(key=lambda child: child.start)
        for child in scope.children:
            self._sort(child)

    def _line_bytes(self, line: int) -> bytes:
        return self.lines[line - 1].encode() if line <= len(self.lines) else b""

    # -- docstrings ---------------------------------------------------------------------------------

    def _is_docstring(self, value: ast.expr) -> bool:
        """A string standing alone as a statement, as the rules see it (LibCST: a string whose parent is
        an expression statement). An implicitly concatenated one is several strings: not a docstring."""
        try:
            tokens = [
                t for t in tokenize.generate_tokens(io.StringIO(self._segment(value)).readline)
                if t.type in _STRING_TOKENS
            ]
        except (tokenize.TokenError, SyntaxError, IndexError, UnicodeDecodeError):
            return False  # then its text counts as code: the safe side
        return len(tokens) == 1

    def _segment(self, node: ast.expr) -> str:
        """The source text of `node` (its columns are UTF-8 byte offsets)."""
        first, last = self._line_bytes(node.lineno), self._line_bytes(node.end_lineno)
        if node.lineno == node.end_lineno:
            return first[node.col_offset : node.end_col_offset].decode()
        middle = "".join(self.lines[node.lineno : node.end_lineno - 1])
        return first[node.col_offset :].decode() + middle + last[: node.end_col_offset].decode()

    # -- spans --------------------------------------------------------------------------------------

    def whole_module(self, tree: ast.Module) -> list[Span]:
        return [self._span(group[0]) for group in line_groups(tree.body)]

    def spans(self) -> tuple[list[Span], list[str | None]]:
        """The spans of the hot statements, and each span's words (`Analysis.span_words`)."""
        spans = []
        for hot in self.hot:
            statement, span = hot, self._span(hot)
            while span is None:  # not on lines of its own: widen to the statement around it
                statement = self.parent[statement]
                span = self._span(statement)
            spans.append((span, hot))
        kept = _disjoint([span for span, _ in spans])
        starts = [first for first, _ in kept]
        words: list[list[str] | None] = [[] for _ in kept]
        for span, hot in spans:
            index = bisect_right(starts, span[0]) - 1
            if hot in self.alias_readers or words[index] is None:
                words[index] = None
            else:
                words[index] += self.words_of.get(hot, [])
        return kept, [None if found is None else "\n".join(found) for found in words]

    def _span(self, statement: ast.stmt) -> Span | None:
        """The lines of `statement` and the statements sharing a line with it, if nothing else is on
        them; None otherwise. A module-level statement always has lines of its own."""
        body, index = self.siblings[statement]
        first, last = line_group(body, index)
        if self.parent[statement] is not None and not (
            self._begins_line(body[first]) and self._ends_line(body[last])
        ):
            return None
        return first_line(body[first]), self._last_line(body[last])

    def _last_line(self, statement: ast.stmt) -> int:
        """The statement's last line, and the lines a backslash after its last token continues to."""
        line, after = statement.end_lineno, self._line_bytes(statement.end_lineno)[statement.end_col_offset :]
        while after.rstrip().endswith(b"\\") and line < len(self.lines):
            line += 1
            after = self._line_bytes(line)
        return line

    def _begins_line(self, statement: ast.stmt) -> bool:
        decorators = getattr(statement, "decorator_list", None)
        start = decorators[0] if decorators else statement
        before = self._line_bytes(start.lineno)[: start.col_offset].strip()
        if decorators:
            return before == b"@"
        rest = self._line_bytes(start.lineno)[start.col_offset :]
        # An `elif` is an `if` inside the orelse of the one before it.
        return before == b"" and not (isinstance(statement, ast.If) and rest.startswith(b"elif"))

    def _ends_line(self, statement: ast.stmt) -> bool:
        after = self._line_bytes(statement.end_lineno)[statement.end_col_offset :].strip()
        if after.startswith(b";"):
            after = after[1:].strip()
        return after in (b"", b"\\") or after.startswith(b"#")


def line_groups(body: list[ast.stmt]) -> list[list[ast.stmt]]:
    """`body` cut into LibCST's statement lines: runs of statements that share lines."""
    groups = []
    index = 0
    while index < len(body):
        first, last = line_group(body, index)
        groups.append(body[first : last + 1])
        index = last + 1
    return groups


def line_group(body: list[ast.stmt], index: int) -> tuple[int, int]:
    """The indices of the first and last statements of `body` that share lines with `body[index]`, directly
    or through each other (`a = 1; b = 2`): LibCST's one statement line."""
    first = last = index
    while first > 0 and body[first - 1].end_lineno >= first_line(body[first]):
        first -= 1
    while last + 1 < len(body) and first_line(body[last + 1]) <= body[last].end_lineno:
        last += 1
    return first, last


def _holds_a_line(definition: ast.stmt, lines: list[int]) -> bool:
    """Does one of `lines` (sorted) fall in `definition`, its decorators included?"""
    at = bisect_left(lines, first_line(definition))
    return at < len(lines) and lines[at] <= definition.end_lineno


def first_line(statement: ast.stmt) -> int:
    decorators = getattr(statement, "decorator_list", None)
    return min(statement.lineno, decorators[0].lineno) if decorators else statement.lineno


def _disjoint(spans: list[Span]) -> list[Span]:
    """Sorted, with spans inside another dropped. Statements nest, so spans never partly overlap."""
    kept: list[Span] = []
    for first, last in sorted(spans, key=lambda span: (span[0], -span[1])):
        if kept and first <= kept[-1][1]:
            if last > kept[-1][1]:
                raise AssertionError(f"lines {first}-{last} partly overlap lines {kept[-1][0]}-{kept[-1][1]}")
            continue
        kept.append((first, last))
    return kept


def nested_bodies(tree: ast.Module):
    """Every statement list below the module's own, with the function, class or module it belongs to."""
    stack: list[tuple[ast.AST, ast.AST]] = [(tree, tree)]
    while stack:
        node, scope = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope = node
        if node is not tree:
            for name in ("body", "orelse", "finalbody"):
                body = getattr(node, name, None)
                if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                    yield scope, body
        stack.extend((child, scope) for child in ast.iter_child_nodes(node))
