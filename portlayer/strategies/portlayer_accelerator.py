"""`PortlayerAccelerator`: DeepSpeed's accelerator for a device it has none of its own for (musa), answered by
portlayer's runtime API and the backend record; one adapter, as DeepSpeed keeps one per device in its
`accelerator/`. A new backend record is all it needs.

Importing this module imports DeepSpeed, which chooses its accelerator as it loads: only
`deepspeed_accelerator.use_active_backend()` imports it, once `DS_ACCELERATOR` is set.
"""

from __future__ import annotations

import contextlib
import functools

import torch
from deepspeed.accelerator.abstract_accelerator import DeepSpeedAccelerator

import portlayer
from portlayer.backends import Backend


def _tensor_type(dtype: torch.dtype) -> property:
    """`accelerator.FloatTensor([1.0])`: a tensor of `dtype` on the accelerator's device."""
    return property(lambda self: functools.partial(torch.tensor, dtype=dtype, device=self._name))


class PortlayerAccelerator(DeepSpeedAccelerator):
    """DeepSpeed's accelerator interface over portlayer's API (the calls torch.cuda's names mirror) and the
    backend record (name, collective, visible-devices and launcher variables, dtypes it lacks). No compiled
    DeepSpeed ops: `create_op_builder` answers None, which DeepSpeed takes as "not on this accelerator"."""

    def __init__(self, backend: Backend):
        super().__init__()
        self.backend = backend
        self._name = backend.name
        self._communication_backend_name = backend.dist_backend
        self._compile_backend = "inductor"

    # Execution model: an accelerator runs kernels asynchronously; the cpu does not.
    def is_synchronized_device(self):
        return not self.backend.is_accelerator

    def use_host_timers(self):
        return self.is_synchronized_device()

    def resolves_data_dependency(self):
        return self.is_synchronized_device()

    def handles_memory_backpressure(self):
        return self.is_synchronized_device()

    # Devices
    def device_name(self, device_index=None):
        return self._name if device_index is None else f"{self._name}:{device_index}"

    def device(self, device_index=None):
        return torch.device(self._name, device_index)

    def set_device(self, device_index):
        portlayer.set_device(device_index)

    def current_device(self):
        return portlayer.current_device()

    def current_device_name(self):
        return self.device_name(portlayer.current_device())

    def device_count(self):
        return portlayer.device_count()

    def synchronize(self, device_index=None):
        return portlayer.synchronize(device_index)

    # Random numbers
    def random(self):
        return torch.random

    def set_rng_state(self, new_state, device_index=None):
        return portlayer.set_rng_state(new_state, *_given(device_index))

    def get_rng_state(self, device_index=None):
        return portlayer.get_rng_state(*_given(device_index))

    def manual_seed(self, seed):
        return portlayer.manual_seed(seed)

    def manual_seed_all(self, seed):
        return portlayer.manual_seed_all(seed)

    def initial_seed(self):
        return portlayer.initial_seed()

    def default_generator(self, device_index):
        return portlayer.device_module().default_generators[device_index]

    # Streams and events
    @property
    def Stream(self):
        return portlayer.Stream

    def stream(self, stream):
        return portlayer.stream(stream)

    def current_stream(self, device_index=None):
        return portlayer.current_stream(*_given(device_index))

    def default_stream(self, device_index=None):
        return portlayer.default_stream(*_given(device_index))

    @property
    def Event(self):
        return portlayer.Event

    # Memory
    def empty_cache(self):
        return portlayer.empty_cache()

    def memory_allocated(self, device_index=None):
        return portlayer.memory_allocated(*_given(device_index))

    def max_memory_allocated(self, device_index=None):
        return portlayer.max_memory_allocated(*_given(device_index))

    def reset_max_memory_allocated(self, device_index=None):
        return portlayer.reset_peak_memory_stats(*_given(device_index))

    def memory_cached(self, device_index=None):
        return portlayer.memory_reserved(*_given(device_index))

    def max_memory_cached(self, device_index=None):
        return portlayer.max_memory_reserved(*_given(device_index))

    def reset_max_memory_cached(self, device_index=None):
        return portlayer.reset_peak_memory_stats(*_given(device_index))

    def memory_stats(self, device_index=None):
        stats = getattr(portlayer.device_module(), "memory_stats", None)
        return {} if stats is None else stats(*_given(device_index))

    def reset_peak_memory_stats(self, device_index=None):
        return portlayer.reset_peak_memory_stats(*_given(device_index))

    def memory_reserved(self, device_index=None):
        return portlayer.memory_reserved(*_given(device_index))

    def max_memory_reserved(self, device_index=None):
        return portlayer.max_memory_reserved(*_given(device_index))

    def total_memory(self, device_index=None):
        return portlayer.get_device_properties(*_given(device_index)).total_memory

    def available_memory(self, device_index=None):
        return portlayer.mem_get_info(*_given(device_index))[0]

    # Data types: the record names those the device lacks or emulates.
    def is_bf16_supported(self):
        return portlayer.is_bf16_supported()

    def is_fp16_supported(self):
        return "float16" not in self.backend.dtype_risks

    def is_fp64_supported(self):
        return "float64" not in self.backend.dtype_risks

    def supported_dtypes(self):
        candidates = (
            (torch.float32, True),
            (torch.float16, self.is_fp16_supported()),
            (torch.bfloat16, self.is_bf16_supported()),
        )
        return [dtype for dtype, supported in candidates if supported]

    def is_available(self):
        return portlayer.is_available()

    # Profiler ranges, lazy initialisation, triton, graphs: features portlayer's API does not carry.
    def range_push(self, msg, domain=None, category=None):
        return None

    def range_pop(self, domain=None):
        return None

    def lazy_call(self, callback):
        return callback()

    def communication_backend_name(self):
        return self._communication_backend_name

    def is_triton_supported(self):
        return False

    def create_graph(self):
        return None

    def capture_to_graph(self, graph, pool=None, stream=None):
        return contextlib.nullcontext()

    def replay_graph(self, graph):
        return None

    # Tensor constructors on this device (DeepSpeed calls them like the legacy torch.cuda.FloatTensor).
    BFloat16Tensor = _tensor_type(torch.bfloat16)
    ByteTensor = _tensor_type(torch.uint8)
    DoubleTensor = _tensor_type(torch.float64)
    FloatTensor = _tensor_type(torch.float32)
    HalfTensor = _tensor_type(torch.float16)
    IntTensor = _tensor_type(torch.int32)
    LongTensor = _tensor_type(torch.int64)

    def on_accelerator(self, tensor):
        return tensor.device.type == self._name

    # DeepSpeed's compiled ops: none here.
    def op_builder_dir(self):
        return None

    def create_op_builder(self, class_name):
        return None

    def get_op_builder(self, class_name):
        return None

    def build_extension(self):
        from torch.utils.cpp_extension import BuildExtension

        return BuildExtension

    # Launcher: the variables it forwards to other nodes, and the one that picks a rank's devices.
    def export_envs(self):
        return list(self.backend.launcher_env_prefixes)

    def visible_devices_envs(self):
        return [self.backend.visible_devices_env]

    def set_visible_devices_envs(self, current_env, local_accelerator_ids):
        for name in self.visible_devices_envs():
            current_env[name] = ",".join(map(str, local_accelerator_ids))

    def get_compile_backend(self):
        return self._compile_backend

    def set_compile_backend(self, backend):
        self._compile_backend = backend


def _given(device_index) -> tuple:
    """portlayer's calls take the device as torch.cuda's do: absent means the current one."""
    return () if device_index is None else (device_index,)
