"""The targets as data: how each spells a device, a device type, a collective backend, a torch.cuda
name, and which import it needs. `neutral` and `torch` are portlayer's and upstream torch's API; every
backend whose record has a `vendor_api` (npu, musa) is a target too, its facts taken from that record.

Templates are Python expressions; `{torch}` is the name the module imports torch under and `{index}`
the device index expression.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from portlayer.backends import PROBE_ORDER, Backend
from portlayer.backends.base import EnvAlias
from portlayer.environment import aliases
from portlayer.migrate import cuda_api

# Placement on the torch target: the accelerator found at run time, else the cpu (`current_accelerator()`
# alone is None on a cpu-only build and, on a CUDA build without a GPU, names the absent GPU).
# `check_available` needs torch 2.7, torch.accelerator's memory functions 2.9: the target's floor.
_ACCELERATOR = '{torch}.accelerator.current_accelerator(check_available=True) or {torch}.device("cpu")'
_ACCELERATOR_TYPE = "(" + _ACCELERATOR + ").type"
# "Is this the accelerator?" (`== "cuda"`, `"cuda" in device`, `.is_cuda`): no where there is none.
_QUESTION = "{torch}.accelerator.is_available() and {value} == {torch}.accelerator.current_accelerator().type"
_QUESTION_IN = "{torch}.accelerator.is_available() and {torch}.accelerator.current_accelerator().type in {value}"


@dataclass(frozen=True)
class Target:
    name: str
    # The module the rewritten code needs ("portlayer", "torch_npu"), or None.
    runtime_import: str | None
    # Expressions for a device type string, a device (optionally indexed) and the collective backend.
    # None: the target spells them as string literals (`vendor` below).
    device_type: str | None
    device: str | None
    indexed_device: str | None
    dist_backend: str | None
    # Where a torch.cuda name the target mirrors lives: "{name}" is filled with the name.
    mirrored: str
    device_module: str
    amp: str = "portlayer.{name}"
    # torch.cuda's generator plumbing (cuda_api.GENERATOR_PLUMBING) -> the target's expression; a name missing
    # is reported (the vendors' `_lazy_init`/`_lazy_call` are private and not in every plugin).
    generators: Mapping[str, str] = field(default_factory=dict)
    # Where torch.cuda.nvtx's markers live ("{name}": range_push, mark, ...); None: the target has none (reported).
    nvtx: str | None = None
    # For vendor targets: the device type ("npu"), collective ("hccl") and its name for env vars.
    vendor: str | None = None
    vendor_dist_backend: str | None = None
    # CUDA/NCCL variable -> the vendor's variable for it (the backend record's alias).
    env: Mapping[str, EnvAlias] = field(default_factory=dict)
    # torch.backends.cudnn flag -> the vendor's equivalent expression.
    cudnn_flags: Mapping[str, str] = field(default_factory=dict)
    float64_native: bool = True
    # "Is `{value}` the accelerator?" for a device type or device (`==`), a device string (`in`) and a
    # tensor (`.is_cuda`); None: the vendor's literal answers it (`device_type == "npu"`, `x.is_npu`).
    question: str | None = None
    question_in: str | None = None
    question_tensor: str | None = None
    # `DistributedDataParallel(device_ids=…)` where the program may run on the cpu, which takes None;
    # None: the target always has its device (the vendors'), and `device_ids` stays as written.
    ddp_device_ids: str | None = None
    # A module-level name defined once, below the imports, as `device_type`, which the sites then read:
    # the torch target's expression is too long to repeat at each autocast and comparison.
    device_type_name: str | None = None

    @property
    def is_vendor(self) -> bool:
        return self.vendor is not None

    def literal_hint(self) -> str:
        """PL405's hint in the target's own terms (a vendor's output has no portlayer dependency)."""
        if self.is_vendor:
            return (f'use `"{self.vendor}"`, `"{self.vendor}:N"` or `torch.device("{self.vendor}", i)` here, '
                    f'and `"{self.vendor_dist_backend}"` for the collective')
        if self.name == "torch":
            return ("use `torch.accelerator.current_accelerator(check_available=True)` (None without an "
                    "accelerator: fall back to the cpu), its `.type`, or "
                    "`torch.distributed.get_default_backend_for_device(...)` here")
        return "use `portlayer.device(i)`, `portlayer.device_type()` or `portlayer.dist_backend()` here"

    def api(self, name: str) -> str | None:
        """The expression template for `torch.cuda.<name>` on this target, or None when it has none."""
        if name in cuda_api.TORCH_GENERIC:
            return "{torch}." + cuda_api.TORCH_GENERIC[name]
        if name in cuda_api.NVTX:
            return None if self.nvtx is None else self.nvtx.format(name=name[len("nvtx."):])
        if name in cuda_api.GENERATOR_PLUMBING:
            return self.generators.get(name)
        if name in cuda_api.AMP_NAMES:
            # torch: the Amp rule rewrites calls (the device type becomes an argument); nothing else.
            return None if self.name == "torch" else self.amp.replace("{name}", name[len("amp."):])
        if self.name == "torch":
            if name in cuda_api.ACCELERATOR:
                return _answering_without_accelerator(
                    "{torch}.accelerator." + cuda_api.ACCELERATOR[name], cuda_api.WITHOUT_ACCELERATOR.get(name))
            if name in cuda_api.PORTLAYER or name in cuda_api.DEVICE_MODULE:
                return _answering_without_accelerator(
                    self.device_module + "." + name, cuda_api.WITHOUT_DEVICE_MODULE.get(name))
            return None
        if name in cuda_api.PORTLAYER:
            return self.mirrored.format(name=name, torch="{torch}")
        if name in cuda_api.DEVICE_MODULE:
            return self.device_module + "." + name
        return None


def _answering_without_accelerator(function: str, answer: str | None) -> str:
    """`function`, or where torch.cuda's gives `answer` on a host without CUDA, a function that gives it too
    where the torch target finds no accelerator (torch's own raises there, or torch.cpu lacks it)."""
    if answer is None:
        return function
    return f"({function} if {{torch}}.accelerator.is_available() else lambda *args, **kwargs: {answer})"


def _vendor(backend: Backend) -> Target:
    name = backend.name
    env = {alias.source: alias for alias in aliases(backend)}
    return Target(
        name=name,
        runtime_import=backend.vendor_module,
        device_type=None,
        device=None,
        indexed_device=None,
        dist_backend=None,
        mirrored="{torch}." + name + ".{name}",
        device_module="{torch}." + name,
        amp="{torch}." + name + ".amp.{name}",
        # torch_npu and torch_musa fill `default_generators` as torch.cuda does (torch_musa/core/random.py).
        generators={"default_generators": "{torch}." + name + ".default_generators"},
        vendor=name,
        vendor_dist_backend=backend.dist_backend,
        env=env,
        cudnn_flags=backend.vendor_api.cudnn_flags,
        float64_native="float64" not in backend.dtype_risks,
    )


_TABLE = {
    "neutral": Target(
        name="neutral",
        runtime_import="portlayer",
        device_type="portlayer.device_type()",
        device="portlayer.device()",
        indexed_device="portlayer.device({index})",
        dist_backend="portlayer.dist_backend()",
        mirrored="portlayer.{name}",
        device_module="portlayer.device_module()",
        nvtx="portlayer.nvtx.{name}",
        generators={
            "default_generators": "portlayer.default_generators",
            "_lazy_init": "portlayer.init",
            "_lazy_call": "portlayer.lazy_call",
        },
        question="portlayer.is_accelerator({value})",
        question_in="portlayer.is_accelerator({value})",
        question_tensor="portlayer.is_accelerator({value})",
        ddp_device_ids="portlayer.ddp_device_ids({ids})",
    ),
    "torch": Target(
        name="torch",
        runtime_import=None,
        device_type=_ACCELERATOR_TYPE,
        device=_ACCELERATOR,
        # No index on the cpu: torch.load cannot map storages to "cpu:0".
        indexed_device="({torch}.device({torch}.accelerator.current_accelerator().type, {index}) "
                       'if {torch}.accelerator.is_available() else {torch}.device("cpu"))',

        dist_backend="{torch}.distributed.get_default_backend_for_device(" + _ACCELERATOR + ")",
        mirrored="{torch}.get_device_module().{name}",
        device_module="{torch}.get_device_module()",
        question=_QUESTION,
        question_in=_QUESTION_IN,
        question_tensor=_QUESTION.replace("{value}", "{value}.device.type"),
        ddp_device_ids="{ids} if {torch}.accelerator.is_available() else None",
        device_type_name="DEVICE_TYPE",
    ),
    **{backend.name: _vendor(backend) for backend in PROBE_ORDER if backend.vendor_api is not None},
}
TARGETS = tuple(_TABLE)


def target_named(name: str) -> Target:
    try:
        return _TABLE[name]
    except KeyError:
        raise ValueError(f"unknown target {name!r}: choose one of {', '.join(TARGETS)}") from None
