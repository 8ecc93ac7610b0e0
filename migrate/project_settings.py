"""`[tool.portlayer]` in pyproject.toml: a project's defaults for `portlayer migrate`.

    [tool.portlayer]
    target = "npu"                              # as --target
    exclude = ["legacy", "tests/fixtures/*"]    # as --exclude (which replaces it when given)
    extend-exclude = ["*_generated.py"]         # added to exclude, even when --exclude is given
    respect-gitignore = true                    # as --respect-gitignore / --no-respect-gitignore
    [tool.portlayer.per-file-ignores]
    "tests/*" = ["PL302"]                       # codes, or prefixes of codes ("PL6"), not reported there

The file is found as ruff finds its own: the nearest pyproject.toml with a `[tool.portlayer]` table, from
the paths given (their common folder) upward. Globs are matched against a file's name, or its path below
that pyproject.toml's folder. Flags given on the command line win.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

KEYS = ("target", "exclude", "extend-exclude", "per-file-ignores", "respect-gitignore")
_CODE_PREFIX = re.compile(r"PL\d{0,3}")


class ConfigError(Exception):
    """The table is there but not what this version understands (one line, naming the file)."""


@dataclass(frozen=True)
class Config:
    path: Path | None = None  # the pyproject.toml read, None without one
    target: str | None = None
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    respect_gitignore: bool | None = None
    _ignore_cache: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def root(self) -> Path | None:
        return None if self.path is None else self.path.parent

    def ignored_codes(self, path: str) -> tuple[str, ...]:
        """The code prefixes `per-file-ignores` drops for the file at `path`."""
        if not self.per_file_ignores:
            return ()
        if path not in self._ignore_cache:
            candidates = [Path(path).name]
            resolved = Path(path).resolve()
            if self.root is not None and self.root in resolved.parents:
                candidates.append(resolved.relative_to(self.root).as_posix())
            self._ignore_cache[path] = tuple(
                code
                for glob, codes in self.per_file_ignores
                if any(fnmatch.fnmatchcase(candidate, glob) for candidate in candidates)
                for code in codes
            )
        return self._ignore_cache[path]


def find(paths: Iterable[Path]) -> Path | None:
    """The nearest pyproject.toml with a [tool.portlayer] table, from the paths' common folder up."""
    absolute = [Path(p).resolve() for p in paths] or [Path.cwd()]
    start = Path(os.path.commonpath([p if p.is_dir() else p.parent for p in absolute]))
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and b"[tool.portlayer" in _read(candidate):
            return candidate
    return None


def load(path: Path | None, targets: Iterable[str]) -> Config:
    if path is None:
        return Config()
    try:
        import tomllib  # novermin: 3.11, and tomli on 3.10
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        document = tomllib.loads(_read(path).decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    table = document.get("tool", {}).get("portlayer", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.portlayer] must be a table")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r} in [tool.portlayer]; expected one of {', '.join(KEYS)}")
    target = table.get("target")
    if target is not None and target not in tuple(targets):
        raise ConfigError(f"{path}: target = {target!r}; expected one of {', '.join(targets)}")
    respect = table.get("respect-gitignore")
    if respect is not None and not isinstance(respect, bool):
        raise ConfigError(f"{path}: respect-gitignore must be true or false")
    exclude = _globs(path, table, "exclude") if "exclude" in table else None
    return Config(path, target, exclude, _globs(path, table, "extend-exclude"), _ignores(path, table), respect)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _globs(path: Path, table: dict, key: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(glob, str) for glob in value):
        raise ConfigError(f"{path}: {key} must be a list of glob strings")
    return tuple(value)


def _ignores(path: Path, table: dict) -> tuple[tuple[str, tuple[str, ...]], ...]:
    value = table.get("per-file-ignores", {})
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: per-file-ignores must be a table of glob = [codes]")
    rows = []
    for glob, codes in value.items():
        if not isinstance(codes, list) or not all(isinstance(c, str) and _CODE_PREFIX.fullmatch(c) for c in codes):
            raise ConfigError(f"{path}: per-file-ignores {glob!r} must be a list of codes like \"PL302\" or \"PL3\"")
        rows.append((glob, tuple(codes)))
    return tuple(rows)
