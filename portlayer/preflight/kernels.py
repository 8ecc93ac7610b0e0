"""Where the answer to "does the target have a kernel for this op?" comes from.

Three sources, best first:
- the dispatcher, where the vendor plugin is installed and registered (exact);
- a list exported from that dispatcher on a vendor machine with `--export-kernels` (exact, for that
  plugin version), or any list a user passes;
- the list committed in `oplists/`, built from the vendor wheel's `npu_native_functions*.yaml` (incomplete:
  the op-plugin's kernels are compiled in and not listed there, so it over-reports).

Whatever the source, an op with a composite kernel runs on every backend: the local dispatcher answers that.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import torch

from portlayer.atomic import write_atomic
from portlayer.backends import BY_NAME
from portlayer.errors import PortlayerError
from portlayer.preflight.plugin_backends import PLUGIN_BACKENDS
from portlayer.selection import device_module, module_installed

# A kernel under one of these is written in terms of other ops and runs on any backend.
COMPOSITE_DISPATCH_KEYS = ("CompositeImplicitAutograd", "CompositeExplicitAutograd")
# Structured ops (gelu, mm, add.Tensor, …) carry a kernel under this key too, but it runs the op's `out=`
# variant on the tensor's backend: native only where that variant is.
STRUCTURED_WRAPPER_KEY = "CompositeExplicitAutogradNonFunctional"
OPLISTS = Path(__file__).with_name("oplists")
HEADER = "# portlayer kernel list"
WHEEL_YAML_CAVEAT = (
    "the wheel's yaml omits the kernels its op-plugin compiles in, so an op reported missing may be native; "
    "for the exact answer run `portlayer preflight --export-kernels FILE --target {target}` where {vendor} "
    "is installed and pass that file with --kernels"
)
_OP_NAME = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*::)?[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)?$")


class KernelListError(PortlayerError):
    """A kernel list that cannot be read or does not fit the target."""


def is_composite(op: str) -> bool:
    return any(torch._C._dispatch_has_kernel_for_dispatch_key(op, key) for key in COMPOSITE_DISPATCH_KEYS)


def out_variant(op: str) -> str | None:
    """`aten::add.out` for `aten::add.Tensor` or `aten::add_.Tensor`: the overload that writes to `out=`
    and takes the same other arguments."""
    namespace, _, qualified = op.partition("::")
    name, _, overload = qualified.partition(".")
    base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
    try:
        packet = getattr(getattr(torch.ops, namespace), base)
        schema = getattr(packet, overload or "default")._schema
        candidates = [getattr(packet, candidate) for candidate in packet.overloads()]
    except (AttributeError, RuntimeError):
        return None

    def in_types(schema) -> list[str]:
        return [str(argument.type) for argument in schema.arguments if not argument.is_out]

    wanted = in_types(schema)
    for candidate in candidates:
        arguments = candidate._schema.arguments
        if any(argument.is_out for argument in arguments) and in_types(candidate._schema) == wanted:
            return candidate.name()
    return None


def classify(op: str, source: KernelSource) -> str:
    """"native" (the target has a kernel), "composite" (runs on any backend) or "missing"."""
    if source.has_kernel(op):
        return "native"
    if is_composite(op):
        return "composite"
    if torch._C._dispatch_has_kernel_for_dispatch_key(op, STRUCTURED_WRAPPER_KEY):
        out = out_variant(op)
        if out is not None and source.has_kernel(out):
            return "native"
    return "missing"


@dataclass(frozen=True)
class KernelSource:
    """Answers `has_kernel(op)` for one target; `label` says where the answer comes from."""

    target: str
    kind: str  # "dispatcher", "exported list", "wheel yaml" or "list"
    label: str
    has_kernel: Callable[[str], bool] = field(repr=False, compare=False)
    caveat: str | None = None

    def as_dict(self) -> dict:
        return {"target": self.target, "kind": self.kind, "label": self.label, "caveat": self.caveat}


def vendor_module(target: str) -> str:
    return BY_NAME[target].vendor_module


def vendor_version(target: str) -> str:
    name = vendor_module(target)
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        module = importlib.import_module(name) if module_installed(name) else None
        return str(getattr(module, "__version__", "unknown version"))


def _owns_its_key(target: str) -> bool:
    # PrivateUse1 is shared by every out-of-tree plugin: it answers for the one that renamed it.
    return BY_NAME[target].dispatch_key != "PrivateUse1" or torch._C._get_privateuse1_backend_name() == target


def plugin_registered(target: str) -> bool:
    """Whether the target's vendor plugin is loaded (importing it if it is installed) and owns its dispatch key."""
    if torch._C._get_privateuse1_backend_name() == target:
        return True
    if not module_installed(vendor_module(target)):
        return False
    try:
        device_module(BY_NAME[target])
    except Exception:  # an installed plugin that cannot load (no driver, no CANN) is no answer either
        return False
    return _owns_its_key(target)


def from_dispatcher(target: str) -> KernelSource:
    key = BY_NAME[target].dispatch_key

    def has_kernel(op: str) -> bool:
        return torch._C._dispatch_has_kernel_for_dispatch_key(op, key)

    label = f"dispatcher ({vendor_module(target)} {vendor_version(target)})"
    return KernelSource(target, "dispatcher", label, has_kernel)


def canonical_op_name(name: str) -> str:
    """`add.Tensor` and `aten::add.Tensor` name the same op; the dispatcher spells it the second way."""
    return name if "::" in name else f"aten::{name}"


def format_kernel_list(ops, header: dict[str, str]) -> str:
    lines = [HEADER, *(f"# {key}: {value}" for key, value in header.items())]
    return "\n".join([*lines, *sorted(set(ops)), ""])


def from_file(path: str | Path, target: str) -> KernelSource:
    """A list written by `export_kernels` or `extract_npu_ops`, or a plain list of op names, one a line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KernelListError(f"cannot read kernel list {path}: {exc.strerror or exc}") from None
    header: dict[str, str] = {}
    ops = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("#"):
            key, colon, value = line.lstrip("# ").partition(":")
            if colon:
                header[key.strip()] = value.strip()
        elif line:
            if not _OP_NAME.match(line):
                raise KernelListError(f"{path}:{number}: not an op name: {line!r}")
            ops.add(canonical_op_name(line))
    listed_target = header.get("target", target)
    if listed_target != target:
        raise KernelListError(f"{path} lists kernels for {listed_target}, not {target}")
    if not ops:
        raise KernelListError(f"{path} lists no ops")
    source = header.get("source", "")
    vendor = header.get("vendor", vendor_module(target))
    if source == "dispatcher":
        kind, label, caveat = "exported list", f"exported list {path} ({vendor})", None
    elif source == "wheel yaml":
        kind, label = "wheel yaml", f"wheel yaml {vendor}"
        caveat = WHEEL_YAML_CAVEAT.format(target=target, vendor=vendor_module(target))
    else:
        kind, label, caveat = "list", f"list {path}", None
    return KernelSource(target, kind, label, ops.__contains__, caveat)


def bundled_list(target: str) -> Path | None:
    """The newest list committed for the target, if any (`oplists/<target>-<vendor version>.txt`)."""

    def version_key(path: Path):
        return tuple(int(part) if part.isdigit() else part for part in re.split(r"[.\-]", path.stem)[1:])

    candidates = sorted(OPLISTS.glob(f"{target}-*.txt"), key=version_key)
    return candidates[-1] if candidates else None


def resolve(target: str, kernels: str | Path | None = None) -> KernelSource:
    """The best source available here for `target`, or the list file the caller chose."""
    if target not in PLUGIN_BACKENDS:
        raise KernelListError(f"unknown target {target!r}: choose one of {', '.join(PLUGIN_BACKENDS)}")
    if kernels is not None:
        return from_file(kernels, target)
    if plugin_registered(target):
        return from_dispatcher(target)
    bundled = bundled_list(target)
    if bundled is not None:
        return from_file(bundled, target)
    raise KernelListError(
        f"no kernel list for {target} here: run where {vendor_module(target)} is installed, or pass "
        f"--kernels FILE (a list exported there with --export-kernels, or one op name a line)"
    )


def export_kernels(target: str, path: str | Path) -> int:
    """Write every op the installed plugin has a kernel for; return how many. Run where the plugin works."""
    if target not in PLUGIN_BACKENDS:
        raise KernelListError(f"unknown target {target!r}: choose one of {', '.join(PLUGIN_BACKENDS)}")
    if not plugin_registered(target):
        raise KernelListError(
            f"--export-kernels needs {vendor_module(target)} installed and loading here; "
            f"it is not ({BY_NAME[target].install_hint})"
        )
    source = from_dispatcher(target)
    ops = [op for op in torch._C._dispatch_get_all_op_names() if source.has_kernel(op)]
    header = {
        "target": target,
        "source": "dispatcher",
        "vendor": f"{vendor_module(target)} {vendor_version(target)}",
        "torch": torch.__version__,
    }
    try:
        write_atomic(path, format_kernel_list(ops, header))
    except OSError as exc:
        raise KernelListError(f"cannot write {path}: {exc.strerror or exc}") from None
    return len(ops)
