"""What one migration produces: the new code, the conversions made, and what was left for a human."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Change:
    """A conversion the codemod made. `line`/`col` point into the input, both 1-based (as gcc, ruff and
    editors print `path:line:col`), here as in every output."""

    code: str
    line: int
    col: int
    message: str


@dataclass(frozen=True)
class Diagnostic:
    """A site the codemod could not convert safely, or something worth knowing about it (1-based
    `line`/`col` into the input, as for `Change`)."""

    code: str
    line: int
    col: int
    message: str
    hint: str
    severity: str  # "error" | "warning" | "info"

    @classmethod
    def of(cls, code: str, line: int, col: int, message: str | None = None, hint: str | None = None) -> Diagnostic:
        """The one way to make a diagnostic: title, hint and severity come from the code's row in
        `portlayer.migrate.codes`, unless a message or hint more precise than the row's is given."""
        from portlayer.migrate.codes import CODES

        row = CODES[code]
        return cls(code, line, col, message or row.title, hint or row.hint, row.severity)

    def format(self, path: str) -> str:
        """`path:line:col: CODE message`, as every text output prints a finding."""
        from portlayer.findings import Finding, text_lines

        return text_lines(Finding(path, self.line, self.col, self.code, self.severity, self.message), hint=False)

    @property
    def category(self) -> str:
        from portlayer.migrate.codes import CODES

        return CODES[self.code].category


@dataclass(frozen=True)
class Settled:
    """What settling the whole migrated text rewrote besides the sites: import statements removed or
    narrowed (their names no longer read), and the lines a program's fallbacks taken moved out of their
    `except` blocks (dedented: every one of them a changed line, none of them a change of meaning)."""

    imports: int = 0
    dedented: int = 0


@dataclass(frozen=True)
class MigrationResult:
    code: str
    changes: tuple[Change, ...]
    diagnostics: tuple[Diagnostic, ...]
    source: str  # the input, so that `changed` needs no second copy kept by the caller
    settled: Settled = Settled()

    @property
    def changed(self) -> bool:
        return self.code != self.source


class SourceError(Exception):
    """The input is not Python this codemod can parse (at a 1-based line and column)."""

    def __init__(self, line: int, col: int, message: str):
        super().__init__(f"{line}:{col}: {message}")
        self.line = line
        self.col = col
        self.message = message
