"""Replace a file in one step: a reader sees the old content or the new, never half of either.

Used for everything portlayer writes that someone may read meanwhile: rewritten sources, run files,
reports, dumps, plots, caches shared by ranks started together.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def replacing(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside `path`; when the block ends without error it replaces `path`.

    The file keeps its permission bits (a new one gets the umask's), and a symbolic link keeps pointing at
    the file, which is replaced. Missing parent folders are made. The temporary name ends with the target's
    suffix, so writers that infer a format from it (matplotlib) still do.
    """
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=target.suffix)
    os.close(handle)
    try:
        yield Path(temporary)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def write_atomic(path: str | os.PathLike, data: bytes | str) -> None:
    """Replace `path` by `data` (text is written as UTF-8)."""
    with replacing(path) as temporary:
        temporary.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
