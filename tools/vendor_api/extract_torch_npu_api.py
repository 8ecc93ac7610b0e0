"""Write tests/vendor_api/torch_npu_api-<release>.json: the names `torch.npu` exports in a torch_npu release,
and the torch it pins, read from its wheel.

The wheel cannot be imported without Ascend CANN, so `torch_npu/npu/__init__.py` is parsed, not run, and the
pin is its metadata's `Requires-Dist: torch==…`. Wheels of the releases before 2.7.1 carry the older
manylinux2014 tag:

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
RECORDS = Path(__file__).resolve().parents[2] / "tests" / "vendor_api"
# `Requires-Dist: torch==2.7.1+cpu`, or in older metadata `Requires-Dist: torch (==2.6.0+cpu)`.
TORCH_PIN = re.compile(r"^Requires-Dist: torch\s*\(?==\s*([^\s);]+)", re.MULTILINE)


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
    parser.add_argument("-o", "--output", type=Path, help="[tests/vendor_api/torch_npu_api-<release>.json]")
    args = parser.parse_args(argv)
    version = re.match(r"torch_npu-([^-]+)-", args.wheel.name)
    release = version.group(1) if version else "unknown"
    metadata_path = f"torch_npu-{release}.dist-info/METADATA"
    try:
        with zipfile.ZipFile(args.wheel) as wheel:
            source = wheel.read(MODULE_PATH).decode("utf-8")
            pin = TORCH_PIN.search(wheel.read(metadata_path).decode("utf-8"))
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        print(f"extract_torch_npu_api: cannot read {args.wheel}: {exc}", file=sys.stderr)
        return 2
    record = {
        "torch_npu": release,
        "torch": pin.group(1) if pin else None,
        "source": MODULE_PATH,
        "names": sorted(set(exported_names(source))),
    }
    output = args.output or RECORDS / f"torch_npu_api-{release}.json"
    output.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"{len(record['names'])} names from torch_npu {release} (torch {record['torch']}) -> {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
