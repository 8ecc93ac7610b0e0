"""Compile the stand-in device (`device.cpp`) once and cache the library.

The cache key is the source's hash and the torch build it is compiled against, so `make test` compiles it
once on a fresh clone (about a minute on two cores) and every later process only loads it. Concurrent
builders (pytest workers, torchrun ranks) wait on one lock; the library is written atomically.
Run `python tests/fake_plugins/fake_vendor/build.py` to build it ahead of time. A build that fails (a torch
whose headers the source does not fit) is reported once and remembered beside the library: every later
process fails at once with the same message, instead of compiling again (delete the `.failed` file to retry).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

SOURCE = Path(__file__).with_name("device.cpp")
# Beside the tests, ignored by git; FAKE_DEVICE_CACHE moves it.
DEFAULT_CACHE = Path(__file__).resolve().parents[2] / ".fake_device_cache"


def _key(torch) -> str:
    digest = hashlib.sha256(SOURCE.read_bytes())
    digest.update(f"{torch.__version__}|{torch._C._GLIBCXX_USE_CXX11_ABI}|{sys.platform}".encode())
    return digest.hexdigest()[:16]


def _compile(torch, target: Path) -> None:
    torch_dir = Path(torch.__file__).parent
    include = torch_dir / "include"
    # torch's headers need C++20 from 2.14 (`requires` clauses in TensorBase.h), C++17 before.
    release = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
    command = [
        os.environ.get("CXX", "g++"),
        "-std=c++20" if release >= (2, 14) else "-std=c++17",
        "-O1",
        "-shared",
        "-fPIC",
        "-w",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
        f"-I{include}",
        f"-I{include / 'torch' / 'csrc' / 'api' / 'include'}",
        f"-I{sysconfig.get_paths()['include']}",
        str(SOURCE),
        f"-L{torch_dir / 'lib'}",
        "-lc10",
        "-ltorch_cpu",
        f"-Wl,-rpath,{torch_dir / 'lib'}",
        "-o",
        str(target),
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"building the stand-in device failed:\n{' '.join(command)}\n{result.stderr[-4000:]}")


def library() -> Path:
    """The compiled stand-in device for this torch, built on first use."""
    import torch

    cache = Path(os.environ.get("FAKE_DEVICE_CACHE", DEFAULT_CACHE))
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / f"fake_device-{_key(torch)}.so"
    failed = target.with_suffix(".failed")
    if target.exists():
        return target
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if failed.exists():
            raise RuntimeError(f"{failed.read_text()}\n(remembered in {failed}; delete it to build again)")
        if not target.exists():
            partial = target.with_suffix(f".{os.getpid()}.partial")
            try:
                _compile(torch, partial)
                os.replace(partial, target)
            except RuntimeError as error:
                failed.write_text(str(error))
                raise
            finally:
                partial.unlink(missing_ok=True)
    return target


if __name__ == "__main__":
    print(library())
