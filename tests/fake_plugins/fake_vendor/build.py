"""Compile the stand-in device (`device.cpp`) once and cache the library.

The cache key is the source's hash and the torch build it is compiled against, so `make test` compiles it
once on a fresh clone (about a minute on two cores) and every later process only loads it. Concurrent
builders (pytest workers, torchrun ranks) wait on one lock; the library is written atomically.
Run `python tests/fake_plugins/fake_vendor/build.py` to build it ahead of time.
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
    command = [
        os.environ.get("CXX", "g++"),
        "-std=c++17",
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
    if target.exists():
        return target
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.exists():
            partial = target.with_suffix(f".{os.getpid()}.partial")
            try:
                _compile(torch, partial)
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
    return target


if __name__ == "__main__":
    print(library())
