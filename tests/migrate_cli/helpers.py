"""Shared inputs and helpers for the `portlayer migrate` driver tests."""

from __future__ import annotations

from pathlib import Path

# A Python module the codemod changes for every target, and one it must leave byte-identical.
CUDA_SOURCE = "import torch\n\n\ndef step():\n    torch.cuda.synchronize()\n"
PLAIN_SOURCE = "import torch\n\n\ndef step(x):\n    return torch.relu(x)\n"


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_bytes(content.encode())
        else:
            path.write_bytes(content)
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
