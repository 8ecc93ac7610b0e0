"""Which files a `portlayer migrate PATH...` run looks at.

A file named on the command line is always taken (a shell script by its suffix, anything else as Python).
Directories are walked recursively for `*.py` and shell scripts, in a stable order, skipping hidden,
virtual-environment, build and cache folders, symbolic links, and whatever `--exclude` matches.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PYTHON_SUFFIXES = (".py",)
SHELL_SUFFIXES = (".sh", ".bash")
# Folders that hold installed or generated code, never the user's own training code.
SKIPPED_DIRS = frozenset(
    {
        "__pycache__",
        "__pypackages__",
        "build",
        "dist",
        "_build",
        "buck-out",
        "node_modules",
        "site-packages",
        "venv",
    }
)


@dataclass(frozen=True)
class Found:
    path: Path
    kind: str  # "python" | "shell"
    size: int = 0  # bytes, to judge whether a run is worth worker processes


@dataclass(frozen=True)
class InputError:
    path: Path
    message: str


def kind_of(path: Path) -> str:
    return "shell" if path.suffix in SHELL_SUFFIXES else "python"


def discover(paths: Iterable[Path], excludes: Iterable[str] = ()) -> tuple[list[Found], list[InputError]]:
    """The files to migrate, each once, and a one-line error for every path that yields none."""
    excludes = tuple(excludes)
    found: dict[Path, Found] = {}
    errors: list[InputError] = []
    for root in paths:
        if root.is_dir():
            files = list(_walk(root, excludes))
            if not files:
                errors.append(InputError(root, "no Python files or shell scripts in this directory"))
        elif root.exists():
            files = [_found(root)]
        else:
            errors.append(InputError(root, "no such file or directory"))
            continue
        for file in files:
            found.setdefault(Path(os.path.realpath(file.path)), file)
    return list(found.values()), errors


def _found(path: Path) -> Found:
    try:
        size = path.stat().st_size
    except OSError:  # unreadable: reading it will say why
        size = 0
    return Found(path, kind_of(path), size)


def _walk(root: Path, excludes: tuple[str, ...]) -> Iterable[Found]:
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(
            name
            for name in dirnames
            if not _skipped_dir(here / name) and not _excluded(here / name, root, excludes)
        )
        for name in sorted(filenames):
            path = here / name
            if not name.endswith(PYTHON_SUFFIXES + SHELL_SUFFIXES) or path.is_symlink():
                continue
            if not _excluded(path, root, excludes):
                yield _found(path)


def _skipped_dir(path: Path) -> bool:
    name = path.name
    return (
        name.startswith(".")
        or name in SKIPPED_DIRS
        or name.endswith(".egg-info")
        or (path / "pyvenv.cfg").exists()
        or path.is_symlink()
    )


def _excluded(path: Path, root: Path, excludes: tuple[str, ...]) -> bool:
    """`--exclude` globs match a file or folder name (`*_test.py`, `legacy`) or its path below the walked
    root (`tests/*`, `scripts/old_*.sh`)."""
    relative = path.relative_to(root).as_posix()
    return any(
        fnmatch.fnmatchcase(path.name, glob) or fnmatch.fnmatchcase(relative, glob) for glob in excludes
    )
