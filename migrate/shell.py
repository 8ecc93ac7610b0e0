"""Shell launch scripts: `CUDA_VISIBLE_DEVICES=…`, `NCCL_*`, other CUDA-only settings and `nvidia-smi`
(and the `deepspeed` launcher, `portlayer.migrate.launchers`).

Only shell code is touched, never comments or text: a variable is renamed where the shell reads or sets it
— an assignment (`NAME=v cmd`, `export NAME=v`, `env NAME=v cmd`, `unset NAME`) or an expansion (`$NAME`,
`${NAME:-0}`), also inside double quotes, `$(…)`, backticks and unquoted here-documents. The names and
their vendor equivalents come from the backend records (`portlayer.backends`), the same table the runtime
uses to carry the variables over at start-up.

For `neutral` (and `torch`) nothing is renamed: the runtime translates the variables itself. Settings
only CUDA reads (`CUDA_DEVICE_MAX_CONNECTIONS`, `TORCH_NCCL_*`) are reported
for every target.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from portlayer.backends import BY_NAME
from portlayer.environment import aliases
from portlayer.migrate import launchers
from portlayer.migrate.results import Change, Diagnostic, MigrationResult
from portlayer.migrate.targets import TARGETS
from portlayer.migrate.variables import VARIABLE, VISIBLE_DEVICES, is_cuda_only, is_interesting

# Words that may open a command without being its name.
_PREFIX_WORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time"})
_DECLARERS = frozenset({"export", "declare", "typeset", "local", "readonly", "unset"})
_ENV_RUNNERS = frozenset({"env", "sudo"})
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[[^\]]*\])?\+?=")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NVIDIA_SMI = re.compile(r"(?<![\w.-])nvidia-smi(?![\w-])")
_INTEGER = re.compile(r"""(["']?)(\d+)\1$""")
_OPERATOR_CHARS = ";&|()<>"
# Batch scheduler directives: comments to the shell, settings to Slurm, PBS and LSF
# (`#SBATCH --export=ALL,CUDA_VISIBLE_DEVICES=0,1`): the variables they name are reported as a command's
# arguments are (`srun --export=…`), never renamed.
_DIRECTIVE = re.compile(r"#(?:SBATCH|PBS|BSUB)\b")


def has_cuda_sites(text: str) -> bool:
    return "nvidia-smi" in text or VARIABLE.search(text) is not None or launchers.mentions_deepspeed(text)


@dataclass(frozen=True)
class Site:
    """Where the shell sets or reads a variable: the name's span, and for `NAME=value` the value's span."""

    start: int
    end: int
    name: str
    value_end: int | None = None


class _Lexer:
    """Just enough of the POSIX shell grammar to know which characters are code, which words open a
    simple command, and where parameter expansions are. Unbalanced quotes run to the end of the file."""

    def __init__(self, text: str):
        self.s = text
        self.commands: list[list[tuple[int, int]]] = []
        self.expansions: list[Site] = []
        self.comments: list[tuple[int, int]] = []
        self._heredocs: list[tuple[str, bool, bool]] = []  # (delimiter, strip tabs, body expands)

    def run(self) -> _Lexer:
        self._commands(0, None)
        return self

    def _commands(self, i: int, closer: str | None) -> int:
        s, n = self.s, len(self.s)
        words: list[tuple[int, int]] = []
        depth = 0
        while i < n:
            c = s[i]
            if c == closer and depth == 0:
                break
            if c in " \t":
                i += 1
            elif s.startswith("\\\n", i):
                i += 2
            elif c == "\n":
                self._end(words)
                words = []
                i = self._heredoc_bodies(i + 1)
            elif c == "#":
                end = s.find("\n", i)
                end = n if end < 0 else end
                self.comments.append((i, end))
                i = end
            elif s.startswith("<<", i) and not s.startswith("<<<", i):
                i = self._heredoc_operator(i)
            elif c in "<>":
                i += 1  # a redirection; its target is read as a word of the command, which is harmless
            elif c in _OPERATOR_CHARS:
                depth += {"(": 1, ")": -1}.get(c, 0) if closer == ")" else 0
                self._end(words)
                words = []
                i += 1
            else:
                end = self._word(i, closer)
                words.append((i, end))
                i = end
        self._end(words)
        return i + 1

    def _end(self, words: list[tuple[int, int]]) -> None:
        if words:
            self.commands.append(words)

    def _word(self, i: int, closer: str | None) -> int:
        s, n = self.s, len(self.s)
        while i < n and s[i] not in " \t\n" and s[i] not in _OPERATOR_CHARS and s[i] != closer:
            c = s[i]
            if c == "\\":
                i += 2
            elif c == "'":
                i = self._single_quoted(i + 1)
            elif c == '"':
                i = self._double_quoted(i + 1)
            elif c == "`":
                i = self._commands(i + 1, "`")
            elif c == "$":
                i = self._dollar(i)
            else:
                i += 1
        return min(i, n)

    def _single_quoted(self, i: int) -> int:
        end = self.s.find("'", i)
        return len(self.s) if end < 0 else end + 1

    def _double_quoted(self, i: int) -> int:
        s, n = self.s, len(self.s)
        while i < n and s[i] != '"':
            if s[i] == "\\":
                i += 2
            elif s[i] == "$":
                i = self._dollar(i)
            elif s[i] == "`":
                i = self._commands(i + 1, "`")
            else:
                i += 1
        return i + 1

    def _dollar(self, i: int) -> int:
        """At a `$`: records `$NAME` and `${NAME…}`, lexes `$(…)`; returns the index after the expansion."""
        s = self.s
        following = s[i + 1 : i + 2]
        if s.startswith("$((", i):
            return self._balanced(i + 1, "(", ")")
        if following == "(":
            return self._commands(i + 2, ")")
        if following == "{":
            name_at = i + 2 + (s[i + 2 : i + 3] in ("#", "!"))
            self._expansion(name_at)
            return self._balanced(i + 1, "{", "}")
        if following == "'":  # $'…' (ANSI-C quoting) allows \' inside
            j = i + 2
            while j < len(s) and s[j] != "'":
                j += 2 if s[j] == "\\" else 1
            return j + 1
        match = self._expansion(i + 1)
        return match.end() if match else i + 1 + (following == "$")

    def _expansion(self, at: int) -> re.Match | None:
        match = _NAME.match(self.s, at)
        if match and is_interesting(match.group()):
            self.expansions.append(Site(match.start(), match.end(), match.group()))
        return match

    def _balanced(self, i: int, opening: str, closing: str) -> int:
        """From an opening bracket to just after its partner, stepping over quotes and nested expansions."""
        s, n = self.s, len(self.s)
        depth, i = 1, i + 1
        while i < n and depth:
            c = s[i]
            if c == "\\":
                i += 2
                continue
            if c == "'" and opening == "{":
                i = self._single_quoted(i + 1)
                continue
            if c == '"':
                i = self._double_quoted(i + 1)
                continue
            if c == "$":
                i = self._dollar(i)
                continue
            depth += (c == opening) - (c == closing)
            i += 1
        return i

    def _heredoc_operator(self, i: int) -> int:
        strip_tabs = self.s.startswith("<<-", i)
        i += 3 if strip_tabs else 2
        while i < len(self.s) and self.s[i] in " \t":
            i += 1
        end = self._word(i, None)
        raw = self.s[i:end]
        delimiter = raw.replace("\\", "").replace("'", "").replace('"', "")
        self._heredocs.append((delimiter, strip_tabs, delimiter == raw))
        return end

    def _heredoc_bodies(self, i: int) -> int:
        """Skips the bodies of here-documents opened on the line just ended; a body that expands
        (unquoted delimiter) still has its `$NAME` and `$(…)` read."""
        s, n = self.s, len(self.s)
        for delimiter, strip_tabs, expands in self._heredocs:
            while i < n:
                end = s.find("\n", i)
                end = n if end < 0 else end
                line = s[i:end]
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    i = end + 1
                    break
                j = i
                while expands and j < end:
                    if s[j] == "\\":
                        j += 2
                    elif s[j] == "$":
                        j = self._dollar(j)
                    else:
                        j += 1
                i = max(end + 1, j)
        self._heredocs = []
        return i


def _assignment_sites(text: str, words: list[tuple[int, int]]) -> list[Site]:
    """Variable names that a simple command sets or unsets: leading `NAME=v` words, and the operands of
    export/declare/local/readonly/unset and of env/sudo."""
    sites = []
    texts = [text[a:b] for a, b in words]
    k = 0
    while k < len(texts) and texts[k] in _PREFIX_WORDS:
        k += 1
    while k < len(texts) and (match := _ASSIGNMENT.match(texts[k])):
        sites.append(_site(words[k], match))
        k += 1
    if k == len(texts):
        return sites
    command, k = texts[k], k + 1
    if command in _DECLARERS:
        for position in range(k, len(texts)):
            match = _ASSIGNMENT.match(texts[position]) or _NAME.fullmatch(texts[position])
            if match:
                sites.append(_site(words[position], match))
    elif command in _ENV_RUNNERS:
        for position in range(k, len(texts)):
            word = texts[position]
            if texts[position - 1] in ("-u", "--unset") and _NAME.fullmatch(word):
                sites.append(_site(words[position], _NAME.fullmatch(word)))
            elif match := _ASSIGNMENT.match(word):
                sites.append(_site(words[position], match))
            elif not word.startswith("-"):
                break
    return sites


def _site(word: tuple[int, int], match: re.Match) -> Site:
    start = word[0]
    name = match.group(1) if match.re is _ASSIGNMENT else match.group()
    value_end = word[1] if match.re is _ASSIGNMENT else None
    return Site(start, start + len(name), name, value_end)


def find_sites(text: str, lexer: _Lexer | None = None) -> tuple[list[Site], list[tuple[int, int]]]:
    """The variable sites in code, in order, and the comment spans (where nothing is code)."""
    lexer = lexer or _Lexer(text).run()
    assigned = [site for words in lexer.commands for site in _assignment_sites(text, words)]
    sites = [site for site in assigned if is_interesting(site.name)] + lexer.expansions
    return sorted(set(sites), key=lambda site: site.start), lexer.comments


class _Positions:
    def __init__(self, text: str):
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def __call__(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._starts, offset)
        return line, offset - self._starts[line - 1] + 1  # 1-based, like every position migrate reports


def migrate_shell(text: str, target: str = "neutral") -> MigrationResult:
    """Pure, like `migrate_source`: the script's text in, the rewritten text and what was done out."""
    if target not in BY_NAME and target not in ("neutral", "torch"):
        raise ValueError(f"unknown target {target!r}")
    lexer = _Lexer(text).run()
    sites, comments = find_sites(text, lexer)
    position = _Positions(text)

    def in_code(offset: int) -> bool:
        return not any(a <= offset < b for a, b in comments)

    directives = [(a, b) for a, b in comments if _DIRECTIVE.match(text, a)]

    def in_directive(offset: int) -> bool:
        return any(a <= offset < b for a, b in directives)

    diagnostics = [
        Diagnostic.of("PL603", *position(match.start()), "nvidia-smi only sees NVIDIA GPUs", smi_hint(target))
        for match in NVIDIA_SMI.finditer(text)
        if in_code(match.start())
    ]
    diagnostics += launchers.launcher_diagnostics(text, lexer.commands, position, target)
    site_starts = {site.start for site in sites}
    # Names in code that the shell itself neither sets nor reads: arguments (`mpirun -x NCCL_DEBUG`), text,
    # and the scheduler's directives.
    others = [
        Site(m.start(), m.end(), m.group())
        for m in VARIABLE.finditer(text)
        if m.start() not in site_starts and (in_code(m.start()) or in_directive(m.start()))
    ]
    for site in sorted(sites + others, key=lambda site: site.start):
        if is_cuda_only(site.name):
            diagnostics.append(
                Diagnostic.of("PL607", *position(site.start), f"{site.name} only affects CUDA; left as is")
            )
    sites = [site for site in sites if not is_cuda_only(site.name)]
    others = [site for site in others if not is_cuda_only(site.name)]

    if target in BY_NAME:
        code, changes = _rename(text, target, sites, others, position, diagnostics)
    else:
        code, changes = text, []
        if sites or others:
            names = ", ".join(sorted({site.name for site in sites + others}))
            why = (
                "portlayer's runtime carries them over to the active backend"
                if target == "neutral"
                else f"their names depend on the vendor; run with {_vendor_targets()} to rename them"
            )
            first = min(site.start for site in sites + others)
            diagnostics.append(Diagnostic.of("PL604", *position(first), f"left {names} as is: {why}"))
    return MigrationResult(
        source=text, code=code, changes=tuple(changes), diagnostics=tuple(sorted(diagnostics, key=_order))
    )


def _rename(text, target, sites, others, position, diagnostics) -> tuple[str, list[Change]]:
    """Renames each site to the backend's variable; reports what has no equivalent or is not a variable."""
    by_source = {alias.source: alias for alias in aliases(BY_NAME[target])}
    for site in others:
        alias = by_source.get(site.name)
        renamed = f"rename it to {alias.target} by hand" if alias else f"{target} has no equivalent"
        diagnostics.append(
            Diagnostic.of(
                _code(site.name, alias),
                *position(site.start),
                f"{site.name} is used here but not as a shell variable; left as is",
                f"if a program passes it on as a variable (mpirun -x, docker -e, srun --export), {renamed}",
            )
        )
    changes: list[Change] = []
    pieces, last = [], 0
    for site in sites:
        line, col = position(site.start)
        alias = by_source.get(site.name)
        if alias is None:
            if site.name != VISIBLE_DEVICES:  # a backend that reads CUDA_VISIBLE_DEVICES itself has no alias
                diagnostics.append(
                    Diagnostic.of("PL605", line, col, f"{site.name} has no {target} equivalent; left as is")
                )
            continue
        replacement, end = alias.target, site.end
        value = _unquoted(text[site.end + 1 : site.value_end]) if site.value_end else None
        if value is not None and not alias.carries(value):
            message = f"{site.name}={value}: {alias.target} does not take this value; left as is"
            diagnostics.append(Diagnostic.of("PL614", line, col, message))
            continue
        if alias.convert is not None:
            value = _INTEGER.match(text, site.end + 1, site.value_end) if site.value_end else None
            if value is None:
                message = f"{site.name} and {alias.target} count in different units; left as is"
                diagnostics.append(Diagnostic.of("PL608", line, col, message))
                continue
            quote, number = value.groups()
            replacement = f"{alias.target}={quote}{alias.convert(number)}{quote}"
            end = site.value_end
        changes.append(Change("PL107", line, col, f"{text[site.start : end]} -> {replacement}"))
        pieces += [text[last : site.start], replacement]
        last = end
    pieces.append(text[last:])
    return "".join(pieces), changes


def _unquoted(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" else value


def _code(name: str, alias) -> str:
    if name == VISIBLE_DEVICES:
        return "PL601"
    return "PL602" if alias else "PL605"


def _vendor_targets() -> str:
    return " or ".join(f"--target {name}" for name in TARGETS if name in BY_NAME)


def smi_hint(target: str) -> str | None:
    """Where the script calls nvidia-smi: the backend's own tool (its record's `smi_command`), if it has one."""
    tool = BY_NAME[target].smi_command if target in BY_NAME else None
    return f"on {target} use `{tool}`" if tool else None


def _order(diagnostic: Diagnostic) -> tuple[int, int]:
    return diagnostic.line, diagnostic.col
