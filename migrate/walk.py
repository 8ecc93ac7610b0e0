"""Which files a `portlayer migrate PATH...` run looks at.

A file named on the command line is always taken: a shell script by its suffix (`.sh`, `.bash`) or, with
no suffix, by its shebang (`#!/bin/bash`); `.yaml`/`.yml` as an accelerate config; anything else as Python.
Directories are walked recursively for `*.py`, shell scripts, extensionless scripts whose shebang names
Python or a shell, and YAML files whose content is an accelerate config, in a stable
order, skipping hidden, virtual-environment, build and cache folders, symbolic links, what `.gitignore`
files ignore (as ruff does; `respect_gitignore=False` turns that off) and whatever the exclude globs match.

A folder named `build` or `dist` is a build output at a project's top (setuptools' `build/lib/…`, wheels in
`dist/`) but a source package inside one (mmengine's `mmengine/dist/`, distributed training): it is walked
when it or the folder holding it has an `__init__.py`, and otherwise skipped with a one-line notice when it
holds Python files, so that no source package is left unconverted without a word (docs/migrate.md).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from portlayer.migrate import accelerate_config

PYTHON_SUFFIXES = (".py",)
SHELL_SUFFIXES = (".sh", ".bash")
# Folders that hold installed or generated code, never the user's own training code.
SKIPPED_DIRS = frozenset(
    {
        "__pycache__",
        "__pypackages__",
        "_build",
        "buck-out",
        "node_modules",
        "site-packages",
        "venv",
    }
)
# Build outputs by name, and as often source packages by the same name (`dist` for distributed training).
BUILD_OUTPUT_DIRS = frozenset({"build", "dist"})
# `#!/usr/bin/python3.11`, `#!/usr/bin/env -S python3 -u`, `#!/bin/bash -e`: the interpreter's name.
_SHEBANG = re.compile(rb"#![ \t]*(?:\S*/)?(?:env[ \t]+(?:-\S+[ \t]+)*)?(?:\S*/)?(\S+)")
_SHEBANG_KINDS = (
    (re.compile(r"(?:python|pypy)[\d.]*"), "python"),
    (re.compile(r"(?:ba|da|z|k)?sh"), "shell"),
)


# accelerate writes its keys in a few hundred bytes; YAML files of other tools are not read whole.
_CONFIG_PEEK = 16384


@dataclass(frozen=True)
class Found:
    path: Path
    kind: str  # "python" | "shell" | "config" (an accelerate config file)
    size: int = 0  # bytes, to judge whether a run is worth worker processes


@dataclass(frozen=True)
class InputError:
    path: Path
    message: str


@dataclass(frozen=True)
class SkippedFolder:
    """A build-output folder left out of a walk that holds Python files: told, never skipped in silence."""

    path: Path
    python_files: int

    @property
    def notice(self) -> str:
        files = f"{self.python_files} Python file{'' if self.python_files == 1 else 's'}"
        return f"{self.path}: skipped as a build output ({files}); name it on the command line to migrate it"


@dataclass(frozen=True)
class Exclusions:
    """What a directory walk leaves out besides hidden, virtual-environment and build folders: globs
    matched against a name, a path below the walked root or below `project_root` (where the
    pyproject.toml that configured them is), and `.gitignore` files unless `respect_gitignore` is off."""

    globs: tuple[str, ...] = ()
    project_root: Path | None = None
    respect_gitignore: bool = True


def shebang_kind(first_bytes: bytes) -> str | None:
    """"python" or "shell" for a script whose first line is a shebang naming one, else None."""
    match = _SHEBANG.match(first_bytes)
    if match is None:
        return None
    name = match.group(1).decode("ascii", "replace")
    return next((kind for pattern, kind in _SHEBANG_KINDS if pattern.fullmatch(name)), None)


def _first_line(path: Path) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.readline(256)
    except OSError:  # unreadable: reading it again will say why
        return b""


def _is_accelerate_config(path: Path) -> bool:
    try:
        with open(path, "rb") as file:
            start = file.read(_CONFIG_PEEK)
    except OSError:  # unreadable: not taken, as an unreadable shebang is not
        return False
    return accelerate_config.is_accelerate_config(start.decode("utf-8", "replace"))


def kind_of(path: Path, first_bytes: bytes | None = None) -> str:
    """The kind of a file named on the command line (or `--stdin-filename`, with the text's start)."""
    if path.suffix in SHELL_SUFFIXES:
        return "shell"
    if path.suffix in accelerate_config.SUFFIXES:
        return "config"  # one that is not accelerate's has nothing to migrate: it comes out unchanged
    if path.suffix == "" and path.name not in ("", "-"):
        start = _first_line(path) if first_bytes is None else first_bytes
        return shebang_kind(start) or "python"
    return "python"


def discover(
    paths: Iterable[Path], excludes: Iterable[str] | Exclusions = ()
) -> tuple[list[Found], list[InputError], list[SkippedFolder]]:
    """The files to migrate, each once, a one-line error for every path that yields none, and the build
    output folders skipped that hold Python files."""
    rules = excludes if isinstance(excludes, Exclusions) else Exclusions(tuple(excludes))
    found: dict[Path, Found] = {}
    errors: list[InputError] = []
    skipped: list[SkippedFolder] = []
    for root in paths:
        if root.is_dir():
            walk = _Walk(root, rules)
            files = list(walk.files())
            skipped += walk.skipped
            if not files:
                errors.append(InputError(root, "no Python files or shell scripts in this directory"))
        elif root.exists():
            files = [_found(root, kind_of(root))]
        else:
            errors.append(InputError(root, "no such file or directory"))
            continue
        for file in files:
            found.setdefault(Path(os.path.realpath(file.path)), file)
    return list(found.values()), errors, skipped


def _found(path: Path, kind: str) -> Found:
    try:
        size = path.stat().st_size
    except OSError:  # unreadable: reading it will say why
        size = 0
    return Found(path, kind, size)


class _Walk:
    def __init__(self, root: Path, rules: Exclusions):
        self.root = root
        self.top = root.resolve()  # .gitignore patterns are matched against paths below their folder
        self.rules = rules
        self.skipped: list[SkippedFolder] = []
        # (folder, its compiled .gitignore), outermost first; those above the root come from the folders
        # between it and its git repository's top, as git reads them.
        self.ignores: list[tuple[Path, object]] = []
        if rules.respect_gitignore:
            for folder in reversed(_up_to_repository_top(self.top)):
                self._read_gitignore(folder)
            # A folder named on the command line is walked even if it is ignored (`.venv/lib/…`), as
            # ripgrep and ruff walk it: then only the .gitignore files inside it apply.
            if self._ignored(self.top, is_dir=True):
                self.ignores.clear()

    def files(self) -> Iterable[Found]:
        for dirpath, dirnames, filenames in os.walk(self.root):
            here = Path(dirpath)
            absolute = self.top / here.relative_to(self.root)
            while self.ignores and not _within(absolute, self.ignores[-1][0]):
                self.ignores.pop()
            if self.rules.respect_gitignore and ".gitignore" in filenames:
                self._read_gitignore(absolute)
            dirnames[:] = sorted(
                name
                for name in dirnames
                if not self._skipped(here / name) and not self._excluded(here / name, absolute / name, True)
            )
            for name in sorted(filenames):
                path = here / name
                kind = self._kind(path)
                if kind is None or path.is_symlink() or self._excluded(path, absolute / name, False):
                    continue
                yield _found(path, kind)

    def _skipped(self, folder: Path) -> bool:
        if folder.name not in BUILD_OUTPUT_DIRS or folder.is_symlink():
            return _skipped_dir(folder)
        if (folder / "__init__.py").exists() or (folder.parent / "__init__.py").exists():
            return False  # a package, or a folder of one: source code that happens to be named so
        python_files = sum(name.endswith(PYTHON_SUFFIXES) for _, _, names in os.walk(folder) for name in names)
        if python_files:
            self.skipped.append(SkippedFolder(folder, python_files))
        return True

    def _kind(self, path: Path) -> str | None:
        if path.name.endswith(PYTHON_SUFFIXES):
            return "python"
        if path.name.endswith(SHELL_SUFFIXES):
            return "shell"
        if path.suffix == "" and not path.name.startswith("."):
            return shebang_kind(_first_line(path))
        if path.name.endswith(accelerate_config.SUFFIXES) and _is_accelerate_config(path):
            return "config"
        return None

    def _read_gitignore(self, folder: Path) -> None:
        try:
            lines = (folder / ".gitignore").read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return
        import pathspec  # only when there is a .gitignore to read: keeps the start-up fast

        self.ignores.append((folder, pathspec.GitIgnoreSpec.from_lines(lines)))

    def _excluded(self, path: Path, absolute: Path, is_dir: bool) -> bool:
        return self._globbed(path, absolute) or self._ignored(absolute, is_dir)

    def _ignored(self, absolute: Path, is_dir: bool) -> bool:
        # The deepest .gitignore with a say decides, as in git (a `!pattern` re-includes).
        for folder, spec in reversed(self.ignores):
            relative = absolute.relative_to(folder).as_posix() + ("/" if is_dir else "")
            verdict = spec.check_file(relative).include
            if verdict is not None:
                return verdict
        return False

    def _globbed(self, path: Path, absolute: Path) -> bool:
        """Exclude globs match a file or folder name (`*_test.py`, `legacy`) or its path below the walked
        root or the project root (`tests/*`, `scripts/old_*.sh`)."""
        globs = self.rules.globs
        if not globs:
            return False
        candidates = [path.name, path.relative_to(self.root).as_posix()]
        project = self.rules.project_root
        if project is not None and _within(absolute, project):
            candidates.append(absolute.relative_to(project).as_posix())
        return any(fnmatch.fnmatchcase(candidate, glob) for glob in globs for candidate in candidates)


def _up_to_repository_top(folder: Path) -> list[Path]:
    """The folders above `folder` up to the top of the git repository it is in (none outside one)."""
    chain = []
    for parent in folder.parents:
        chain.append(parent)
        if (parent / ".git").exists():
            return chain
    return []


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _skipped_dir(path: Path) -> bool:
    name = path.name
    return (
        name.startswith(".")
        or name in SKIPPED_DIRS
        or name.endswith(".egg-info")
        or (path / "pyvenv.cfg").exists()
        or path.is_symlink()
    )
