# Signatures of portlayer's runtime API, for IDEs and type checkers: the names are bound on first use to the
# active backend's own functions (portlayer/runtime.py), so the module itself shows none. The mirrored names
# take torch.cuda's parameters; tests/runtime/test_stub.py checks this file against the bound names.
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from types import ModuleType
from typing import Any

import torch

from portlayer import nvtx as nvtx  # torch.cuda.nvtx's ranges and marks on every backend
from portlayer.backends import Backend
from portlayer.errors import PortlayerError as PortlayerError

_Device = torch.device | str | int | None

__version__: str
__all__: list[str]

def activate(name: str | None = None) -> Backend:
    """Select the backend (`name`, else PORTLAYER_BACKEND, else probing) and bind the API to it."""

def patch() -> None:
    """Apply the drop-in's process-wide patches for the active backend (nothing on cuda). Idempotent."""

def unpatch() -> None:
    """Put back every object `patch()` replaced, exactly. Idempotent."""

def patched() -> AbstractContextManager[None]:
    """`with portlayer.patched(): …` — the drop-in's patches inside the block only."""

# torch.cuda's names, answering for the active backend.
def is_available() -> bool:
    """Whether the active backend has a usable device (False on the cpu, as torch.cuda without CUDA)."""

def device_count() -> int:
    """How many devices this process sees (0 on the cpu)."""

def current_device() -> int:
    """The index of the current device."""

def set_device(device: _Device) -> None:
    """Make `device` the current device."""

def synchronize(device: _Device = None) -> None:
    """Wait for all work queued on `device` (default: the current one)."""

def manual_seed(seed: int) -> None:
    """Seed the current device's random generator."""

def manual_seed_all(seed: int) -> None:
    """Seed every device's random generator."""

def seed() -> None:
    """Seed the current device's generator with a random number."""

def initial_seed() -> int:
    """The current device's initial seed."""

def get_rng_state(device: _Device = ...) -> torch.Tensor:
    """The random generator state of `device`, as a byte tensor."""

def set_rng_state(new_state: torch.Tensor, device: _Device = ...) -> None:
    """Restore the random generator state of `device`."""

def empty_cache() -> None:
    """Release the device memory the allocator caches."""

def memory_allocated(device: _Device = None) -> int:
    """Bytes held by tensors on `device`."""

def max_memory_allocated(device: _Device = None) -> int:
    """Peak of `memory_allocated` since the start or the last reset."""

def memory_reserved(device: _Device = None) -> int:
    """Bytes the allocator holds on `device`, cached included."""

def max_memory_reserved(device: _Device = None) -> int:
    """Peak of `memory_reserved` since the start or the last reset."""

def reset_peak_memory_stats(device: _Device = None) -> None:
    """Restart the peak figures from the current ones."""

def mem_get_info(device: _Device = None) -> tuple[int, int]:
    """(free, total) bytes of `device`."""

def get_device_name(device: _Device = None) -> str:
    """The device's product name."""

def get_device_properties(device: _Device = None) -> Any:
    """The device's properties (name, total_memory, …)."""

def get_device_capability(device: _Device = None) -> tuple[int, int] | None:
    """The device's compute capability; None where the backend has no such concept (Ascend)."""

def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether the device computes in bfloat16."""

class Event:
    """A device event: record it on a stream, wait for it, time between two."""
    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None: ...
    def record(self, stream: Stream | None = None) -> None: ...
    def synchronize(self) -> None: ...
    def elapsed_time(self, end_event: Event) -> float: ...

class Stream:
    """A device stream (a queue of work)."""
    def __init__(self, device: _Device = None, priority: int = 0, **kwargs: Any) -> None: ...
    def synchronize(self) -> None: ...
    def wait_stream(self, stream: Stream) -> None: ...

def is_current_stream_capturing() -> bool:
    """Whether the current stream is capturing a graph (False where the backend has no graph capture)."""

def stream(stream: Stream | None) -> AbstractContextManager[Any]:
    """`with portlayer.stream(s):` — work inside the block is queued on `s`."""

def current_stream(device: _Device = None) -> Stream:
    """The stream work on `device` is queued on now."""

def default_stream(device: _Device = None) -> Stream:
    """The device's default stream."""

# torch.cuda's generator plumbing, for code that saves and restores the device's random state itself.
default_generators: Sequence[torch.Generator]
"""torch.cuda.default_generators: the device's generators, by index, read when indexed (the cpu: torch's own)."""

def init() -> None:
    """Start the device now (torch.cuda.init, torch.cuda._lazy_init); nothing on the cpu."""

def lazy_call(callable: Callable[[], Any], **kwargs: Any) -> None:
    """torch.cuda._lazy_call: run `callable` once the device has started (at once where it has)."""

# torch.cuda.amp's pair, on the active device type.
class autocast(torch.autocast):
    """`torch.autocast` on the active backend; `dtype=None` takes the backend's default."""
    def __init__(self, enabled: bool = True, dtype: torch.dtype | None = None, cache_enabled: bool | None = None) -> None: ...

class GradScaler(torch.amp.GradScaler):
    """`torch.amp.GradScaler` on the active backend."""
    def __init__(
        self,
        init_scale: float = 65536.0,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None: ...

# What torch.cuda lacks.
def backend() -> Backend:
    """The active backend's record (name, collective, visible-devices variable, vendor module)."""

def device_type() -> str:
    """"cuda", "npu", "musa", "xpu", "mlu", "mps", "cpu", …"""

def device(index: int | str | torch.device | None = None) -> torch.device:
    """A torch.device of the active type (index defaults to the current device; the cpu has none)."""

def is_accelerator(value: Any) -> bool:
    """Whether a tensor, device, device string or index names the accelerator (False on the cpu)."""

def device_module() -> ModuleType:
    """The vendor's device module (torch.npu, torch.musa, torch.cuda, …; torch.cpu on the host)."""

def dist_backend() -> str:
    """The collective: "nccl", "hccl", "mccl", "xccl", "cncl", or "gloo"."""

def ddp_device_ids(device_or_index: Any) -> list[int] | None:
    """What DistributedDataParallel(device_ids=…) needs here (None on the cpu)."""

def visible_devices_env() -> str:
    """The variable that selects devices: CUDA_VISIBLE_DEVICES, ASCEND_RT_VISIBLE_DEVICES, …"""

def set_deterministic(on: bool = True, warn_only: bool = False) -> None:
    """Deterministic algorithms, plus the backend's own switches (cudnn's, HCCL_DETERMINISTIC)."""
