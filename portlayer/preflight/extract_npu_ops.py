"""Build the committed npu kernel list from a torch_npu wheel's `npu_native_functions*.yaml`.

The wheel is x86_64/aarch64 only and needs CANN to import, so this reads the yaml out of the zip:

    pip download torch_npu==2.14.0 --no-deps --only-binary=:all: --python-version 3.11 \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d /tmp/npu
    python -m portlayer.preflight.extract_npu_ops /tmp/npu/torch_npu-2.14.0-*.whl

writes `portlayer/preflight/oplists/npu-2.14.0.txt`. It also takes the yaml files themselves (then pass
--version). It downloads nothing.

The yaml's `custom` section declares torch_npu's own ops (the `npu::` namespace); every other section names
aten ops that torch_npu registers a kernel for.
"""

from __future__ import annotations

import argparse
import re
import sys
import zipfile
from pathlib import Path

import yaml

from portlayer.atomic import write_atomic
from portlayer.errors import print_error
from portlayer.preflight.kernels import OPLISTS, canonical_op_name, format_kernel_list

_YAML_IN_WHEEL = re.compile(r"(^|/)npu_native_functions[^/]*\.ya?ml$")
_WHEEL_VERSION = re.compile(r"^torch_npu-([^-]+)-")
# Sections that describe the yaml rather than list ops.
_SETTINGS = ("backend", "cpp_namespace")


def _op_name(entry) -> str:
    # An entry is "add.Tensor", {"func": "add.Tensor", ...} or {"func": "add.Tensor(Tensor self, ...) -> Tensor"}.
    func = entry["func"] if isinstance(entry, dict) else entry
    return str(func).split("(", 1)[0].strip()


def _base_name(op: str) -> str:
    return op.split(".", 1)[0]


def ops_from_yaml(texts) -> set[str]:
    """The aten ops that the given npu_native_functions yaml documents have kernels for."""
    documents = [yaml.safe_load(text) or {} for text in texts]
    own_ops = {_base_name(_op_name(entry)) for doc in documents for entry in doc.get("custom") or ()}
    ops = set()
    for document in documents:
        for section, entries in document.items():
            if section in _SETTINGS or section == "custom" or not isinstance(entries, list):
                continue
            ops.update(_op_name(entry) for entry in entries if _base_name(_op_name(entry)) not in own_ops)
    return {canonical_op_name(op) for op in ops}


def read_wheel(path: Path) -> tuple[str, list[str]]:
    """The wheel's torch_npu version and the text of each npu_native_functions yaml in it."""
    match = _WHEEL_VERSION.match(path.name)
    if match is None:
        raise ValueError(f"{path.name} is not a torch_npu wheel name (torch_npu-<version>-...whl)")
    with zipfile.ZipFile(path) as wheel:
        names = sorted(name for name in wheel.namelist() if _YAML_IN_WHEEL.search(name))
        if not names:
            raise ValueError(f"{path} holds no npu_native_functions*.yaml")
        return match.group(1), [wheel.read(name).decode("utf-8") for name in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m portlayer.preflight.extract_npu_ops", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", type=Path, help="a torch_npu wheel, or its yaml files")
    parser.add_argument("--version", help="torch_npu version (read from the wheel's name when given a wheel)")
    parser.add_argument("-o", "--output", type=Path, help="default: oplists/npu-<version>.txt in this package")
    args = parser.parse_args(argv)
    try:
        version, texts = args.version, []
        for path in args.inputs:
            if path.suffix == ".whl":
                wheel_version, wheel_texts = read_wheel(path)
                version = version or wheel_version
                texts += wheel_texts
            else:
                texts.append(path.read_text(encoding="utf-8"))
        if version is None:
            raise ValueError("pass --version: it cannot be read from yaml files")
        ops = ops_from_yaml(texts)
    except (OSError, ValueError, zipfile.BadZipFile, yaml.YAMLError) as exc:
        print_error(exc, prog="extract_npu_ops")
        return 2
    output = args.output or OPLISTS / f"npu-{version}.txt"
    header = {
        "target": "npu",
        "source": "wheel yaml",
        "vendor": f"torch_npu {version}",
        "from": ", ".join(path.name for path in args.inputs),
        "regenerate": "python -m portlayer.preflight.extract_npu_ops <wheel> (see the module's docstring)",
    }
    write_atomic(output, format_kernel_list(ops, header))
    print(f"{output}: {len(ops)} aten ops from torch_npu {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
