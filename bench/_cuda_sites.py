"""The CUDA-specific sites of a file, and what `migrate` did with each: converted, reported, or left in
silence (issue 30's measure: a user porting a repository must hear about every site the command leaves).

A site is a line of the ORIGINAL file that says something only CUDA means:
- in Python code (not comments, docstrings or other strings): `torch.cuda`, `.cuda(`, `.is_cuda`,
  `cudnn.<name>`, `Backend.NCCL`;
- as the whole value of a Python string (f-strings with their fields as `{}`): a CUDA device
  (`'cuda'`, `'cuda:0'`, `f'cuda:{rank}'`), `'nccl'`, the name of a CUDA/NCCL environment variable; or a
  string that runs `nvidia-smi`;
- in a shell script's code (after a `#` that opens a comment, nothing counts): a CUDA/NCCL variable, `nvidia-smi`.

An `import torch.cuda` without an alias is no site: it imports on every build of torch; its uses are.

A site is *converted* when its line differs in the output, *reported* when a diagnostic points into its
statement (a compound statement's header lines; PL411 speaks for the whole `if` chain it is on, PL604
for the whole shell script it leaves to the runtime), and *silent* otherwise.

The patterns are this counter's own, on purpose not the codemod's (`portlayer.migrate.variables`): a
counter that asked the codemod what is CUDA-specific could never find what the codemod misses.
"""

from __future__ import annotations

import ast
import difflib
import io
import re
import tokenize
from collections import defaultdict
from dataclasses import dataclass, field

# Matched against a line's code with its strings and comments taken out.
CODE_PATTERNS = {
    "torch.cuda": re.compile(r"(?<![\w.])torch\.cuda\b"),
    ".cuda()": re.compile(r"\.cuda\("),
    ".is_cuda": re.compile(r"\.is_cuda\b"),
    "cudnn": re.compile(r"\bcudnn\.[A-Za-z_]"),
    "Backend.NCCL": re.compile(r"\bBackend\.NCCL\b"),
}
_VARIABLE = r"CUDA_VISIBLE_DEVICES|NCCL_\w+|CUDA_DEVICE_MAX_CONNECTIONS|PYTORCH_CUDA_ALLOC_CONF|CUDA_LAUNCH_BLOCKING"
# Matched against the value of each Python string.
STRING_PATTERNS = {
    "'cuda' device": re.compile(r"^cuda(?::\d*|:\{\})?$"),
    "'nccl'": re.compile(r"^nccl$"),
    "CUDA/NCCL variable": re.compile(rf"^(?:{_VARIABLE}|TORCH_NCCL_\w+)$"),
    "nvidia-smi": re.compile(r"(?<![\w-])nvidia-smi(?![\w-])"),
}
# Matched against a shell line's code.
SHELL_PATTERNS = {
    "CUDA/NCCL variable": re.compile(rf"\b(?:{_VARIABLE}|TORCH_NCCL_\w+)\b"),
    "nvidia-smi": re.compile(r"(?<![\w-])nvidia-smi(?![\w-])"),
}
# Every pattern above holds one of these words (lowercased): a file without them has no site.
_WORDS = ("cuda", "cudnn", "nccl", "nvidia-smi")
_SHELL_COMMENT = re.compile(r"(?:^|(?<=\s))#.*")
# Diagnostics that speak for more than their statement: the `if` chain, the whole script.
_WHOLE_CHAIN = "PL411"
_WHOLE_SCRIPT = "PL604"
VERDICTS = ("converted", "reported", "silent")


@dataclass(frozen=True)
class Site:
    line: int
    patterns: tuple[str, ...]
    text: str  # the line, stripped


@dataclass
class SiteCount:
    """Sites by verdict, over a file or a tree; the silent ones kept, with their file."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))
    silent: list[tuple[str, Site]] = field(default_factory=list)

    @property
    def sites(self) -> int:
        return sum(self.counts.values())

    def add(self, other: SiteCount) -> None:
        for verdict in VERDICTS:
            self.counts[verdict] += other.counts[verdict]
        self.silent += other.silent


def count_sites(path: str, kind: str, before: str, after: str, diagnostics) -> SiteCount:
    """The verdict on each site of `before` (a file of `kind`), migrated to `after` with `diagnostics`
    (objects with `.code` and a 1-based `.line` into `before`)."""
    count = SiteCount()
    if kind not in ("python", "shell") or not any(word in before.lower() for word in _WORDS):
        return count
    try:
        sites, covered = _python_sites(before, diagnostics) if kind == "python" else _shell_sites(before, diagnostics)
    except (SyntaxError, ValueError, tokenize.TokenError):  # not Python: the run reports it (PL901)
        return count
    changed = changed_lines(before, after)
    for site in sites:
        verdict = "converted" if site.line in changed else "reported" if site.line in covered else "silent"
        count.counts[verdict] += 1
        if verdict == "silent":
            count.silent.append((path, site))
    return count


def changed_lines(before: str, after: str) -> set[int]:
    """The 1-based lines of `before` that `after` replaces or deletes."""
    if before == after:
        return set()
    old, new = before.split("\n"), after.split("\n")
    changed = set()
    for tag, start, end, _, _ in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            changed.update(range(start + 1, end + 1))
    return changed


def _python_sites(text: str, diagnostics) -> tuple[list[Site], set[int]]:
    """The sites of a Python file, and the lines its diagnostics speak for."""
    tree = ast.parse(text)
    patterns = defaultdict(set)
    for line, names in _code_sites(text):
        patterns[line].update(names)
    for line in _plain_torch_cuda_imports(tree):
        patterns[line].discard("torch.cuda")
    for line, value in _string_values(tree):
        patterns[line].update(name for name, pattern in STRING_PATTERNS.items() if pattern.search(value))
    return _sites(text, patterns), _covered_statements(tree, diagnostics)


def _code_sites(text: str):
    """(line, pattern names) for each line whose code, its strings and comments blanked out, matches."""
    lines = text.split("\n")
    prose = {tokenize.COMMENT, tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in prose:
            _blank(lines, token.start, token.end)
    for number, line in enumerate(lines, 1):
        names = [name for name, pattern in CODE_PATTERNS.items() if pattern.search(line)]
        if names:
            yield number, names


def _blank(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> None:
    """Spaces over the text from `start` to `end` (tokenize's (line, column) positions)."""
    for number in range(start[0], end[0] + 1):
        line = lines[number - 1]
        first = start[1] if number == start[0] else 0
        last = end[1] if number == end[0] else len(line)
        lines[number - 1] = line[:first] + " " * (last - first) + line[last:]


def _plain_torch_cuda_imports(tree: ast.AST):
    """The lines of `import torch.cuda` (no alias): no site, it imports on every build of torch (which
    imports it itself); what the program then calls through it are the sites."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and all(a.name == "torch.cuda" and not a.asname for a in node.names):
            yield from range(node.lineno, node.end_lineno + 1)


def _string_values(tree: ast.AST):
    """(line, value) for each string in code: docstrings and other bare string statements are text."""
    bare = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    parts_of_fstrings = set()
    for node in ast.walk(tree):
        if id(node) in bare or id(node) in parts_of_fstrings:
            continue
        if isinstance(node, ast.JoinedStr):
            parts_of_fstrings.update(id(part) for part in node.values)
            yield node.lineno, "".join(_fstring_text(part) for part in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def _fstring_text(part: ast.AST) -> str:
    return part.value if isinstance(part, ast.Constant) else "{}"


def _covered_statements(tree: ast.AST, diagnostics) -> set[int]:
    statement_of = _statement_lines(tree)
    chains = {node.lineno: node.end_lineno for node in ast.walk(tree) if isinstance(node, ast.If)}
    covered = set()
    for diagnostic in diagnostics:
        first, last = statement_of.get(diagnostic.line, (diagnostic.line, diagnostic.line))
        if diagnostic.code == _WHOLE_CHAIN and diagnostic.line in chains:
            first, last = diagnostic.line, chains[diagnostic.line]
        covered.update(range(first, last + 1))
    return covered


def _statement_lines(tree: ast.AST) -> dict[int, tuple[int, int]]:
    """line -> (first, last) line of the innermost statement on it; for a compound statement, its
    header (decorators to the line before its body)."""
    where = {}
    for node in ast.walk(tree):  # outer statements first: inner ones overwrite their lines
        if not isinstance(node, ast.stmt):
            continue
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            lines = (first, max(node.lineno, body[0].lineno - 1))
        else:
            lines = (node.lineno, node.end_lineno)
        for line in range(lines[0], lines[1] + 1):
            where[line] = lines
    return where


def _shell_sites(text: str, diagnostics) -> tuple[list[Site], set[int]]:
    """The sites of a shell script, and the lines its diagnostics speak for."""
    patterns = defaultdict(set)
    for number, line in enumerate(text.split("\n"), 1):
        code = _SHELL_COMMENT.sub("", line)
        patterns[number].update(name for name, pattern in SHELL_PATTERNS.items() if pattern.search(code))
    lines = {diagnostic.line for diagnostic in diagnostics}
    if any(diagnostic.code == _WHOLE_SCRIPT for diagnostic in diagnostics):
        lines = set(range(1, text.count("\n") + 2))
    return _sites(text, patterns), lines


def _sites(text: str, patterns: dict[int, set[str]]) -> list[Site]:
    lines = text.split("\n")
    return [Site(line, tuple(sorted(names)), lines[line - 1].strip()[:160])
            for line, names in sorted(patterns.items()) if names]
