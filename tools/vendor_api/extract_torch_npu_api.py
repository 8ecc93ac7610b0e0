"""Regenerate torch_npu_api.json: the names `torch.npu` exports, read from a torch_npu wheel.

The wheel cannot be imported without Ascend CANN, so `torch_npu/npu/__init__.py` is parsed, not run:

    pip download torch_npu==2.14.0 --no-deps --only-binary=:all: \
        --platform manylinux_2_28_x86_64 --python-version 3.11 -d /tmp/npu
    python -m tools.vendor_api.extract_torch_npu_api /tmp/npu/torch_npu-2.14.0-*.whl
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import zipfile
from pathlib import Path

MODULE_PATH = "torch_npu/npu/__init__.py"
OUTPUT = Path(__file__).resolve().parents[2] / "tests" / "vendor_api" / "torch_npu_api.json"


def exported_names(source: str) -> list[str]:
    """The string elements of every `__all__ = [...]` / `__all__ += [...]` at module level."""
    names: list[str] = []
    for node in ast.parse(source).body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AugAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            if isinstance(node, ast.Assign):
                names.clear()
            names.extend(e.value for e in getattr(node.value, "elts", ()) if isinstance(e, ast.Constant))
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("wheel", type=Path)
    parser.add_argument("-o", "--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    version = re.match(r"torch_npu-([^-]+)-", args.wheel.name)
    try:
        with zipfile.ZipFile(args.wheel) as wheel:
            source = wheel.read(MODULE_PATH).decode("utf-8")
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        print(f"extract_torch_npu_api: cannot read {MODULE_PATH} from {args.wheel}: {exc}", file=sys.stderr)
        return 2
    record = {
        "torch_npu": version.group(1) if version else "unknown",
        "source": MODULE_PATH,
        "names": sorted(set(exported_names(source))),
    }
    args.output.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"{len(record['names'])} names from torch_npu {record['torch_npu']} -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
