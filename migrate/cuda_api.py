"""What the codemod knows about `torch.cuda`'s names, as tables. A name in none of them is reported
(PL401), never guessed."""

from __future__ import annotations

from portlayer.api import AMP, MIRRORED

# Submodules whose functions torch.cuda re-exports: `torch.cuda.memory.memory_allocated` is
# `torch.cuda.memory_allocated`.
REEXPORTING_SUBMODULES = ("memory.", "random.", "streams.")

# Names portlayer mirrors, plus torch.cuda.device (portlayer.device doubles as its context manager) and
# torch.cuda.init (portlayer.init: torch.cpu has none, so `portlayer.device_module().init` fails on the cpu).
PORTLAYER = frozenset(MIRRORED) | {"device", "init"}

# torch.cuda's generator state reached directly (Megatron-LM's RNG tracker): names only portlayer, and the
# vendors under their own name, have everywhere (portlayer/generators.py). Per target in `Target.generators`;
# a target without a name reports it (upstream torch: torch.cpu has none of them).
GENERATOR_PLUMBING = frozenset({"default_generators", "_lazy_init", "_lazy_call"})

# torch.cuda names every vendor device module also has (torch_npu, torch_musa mirror torch.cuda's
# surface), but portlayer does not bind: reached through the device module.
DEVICE_MODULE = frozenset({
    "memory_stats", "memory_summary", "memory_snapshot", "reset_max_memory_allocated",
    "reset_accumulated_memory_stats", "ipc_collect", "set_per_process_memory_fraction",
    "is_initialized", "init", "utilization", "get_rng_state_all", "set_rng_state_all",
    "set_stream", "StreamContext", "device_of", "max_memory_cached", "memory_cached",
    "reset_max_memory_cached", "caching_allocator_alloc", "caching_allocator_delete",
})

# torch.cuda -> torch.accelerator (complete in torch 2.9, the torch target's floor). set_device,
# synchronize and the streams go through `torch.get_device_module()` instead: torch.accelerator's raise
# where there is no accelerator, torch.cpu's (what that module is then) do nothing, as placement wants.
ACCELERATOR = {
    "is_available": "is_available",
    "device_count": "device_count",
    "current_device": "current_device_index",
    "device": "device_index",
    "empty_cache": "empty_cache",
    "memory_allocated": "memory_allocated",
    "max_memory_allocated": "max_memory_allocated",
    "memory_reserved": "memory_reserved",
    "max_memory_reserved": "max_memory_reserved",
    "memory_stats": "memory_stats",
    "reset_peak_memory_stats": "reset_peak_memory_stats",
    "reset_accumulated_memory_stats": "reset_accumulated_memory_stats",
}

# torch.accelerator's memory functions raise where there is no accelerator; torch.cuda's answer on a host
# without CUDA, and the torch target keeps that answer (docs/migrate.md, "Meaning").
WITHOUT_ACCELERATOR = {
    "empty_cache": "None",
    "memory_allocated": "0",
    "max_memory_allocated": "0",
    "memory_reserved": "0",
    "max_memory_reserved": "0",
    "memory_stats": "dict()",
    "reset_peak_memory_stats": "None",
    "reset_accumulated_memory_stats": "None",
}

# torch.cuda's seeding functions are queued until CUDA starts: on a host without CUDA they do nothing.
# torch.cpu, what `torch.get_device_module()` returns there, has none of them (minGPT's set_seed), nor
# `init` (nothing to start) or `is_current_stream_capturing` (no capture without an accelerator: False).
WITHOUT_DEVICE_MODULE = {
    "manual_seed": "None", "manual_seed_all": "None", "seed": "None", "init": "None",
    "is_current_stream_capturing": "False",
}

# Device-generic classes in torch itself.
TORCH_GENERIC = {"OutOfMemoryError": "OutOfMemoryError", "nvtx.range": "profiler.record_function"}

# torch.cuda.nvtx's markers, which only portlayer has everywhere (`portlayer.nvtx`: NVTX on cuda, torch profiler
# ranges elsewhere; a CPU build of torch, the vendors', has no NVTX and raises). Upstream torch and the vendors have no
# push/pop: reported on those targets.
NVTX = frozenset({"nvtx.range_push", "nvtx.range_pop", "nvtx.range_start", "nvtx.range_end", "nvtx.mark"})

# `is_current_stream_capturing` is not among them: a question, answered everywhere (False without capture).
# PL401's hint for torch.cuda names with no equivalent that training code reaches (Megatron-LM's
# megatron/core: allocator pools, raw streams, NVML telemetry): what to do instead, name by name.
_GUARD = 'or guard it with `portlayer.device_type() == "cuda"`'
NO_EQUIVALENT_HINTS = {
    **dict.fromkeys(GENERATOR_PLUMBING, (
        "migrate with `--target neutral`: `portlayer.default_generators`, `portlayer.init` and "
        "`portlayer.lazy_call` answer on every backend, the cpu included; torch_npu keeps "
        "`torch.npu._lazy_init`/`_lazy_call` private")),
    **dict.fromkeys(("MemPool", "use_mem_pool"), (
        "a private pool of CUDA's caching allocator: drop the `with use_mem_pool(...)` (the default pool "
        f"serves) {_GUARD}; torch_npu and torch_musa have MemPool, not CUDA's pluggable allocators")),
    "CUDAPluggableAllocator": f"an allocator built against the CUDA runtime: keep the target's default, {_GUARD}",
    "ExternalStream": f"wraps a raw cudaStream_t of another CUDA library: use `portlayer.Stream()` for the program's own, {_GUARD}",
    "cudart": f"CUDA runtime calls (cudaProfilerStart/Stop): profile with `torch.profiler.profile`, {_GUARD}",
    **dict.fromkeys(("temperature", "power_draw", "clock_rate"), (
        f"NVML telemetry: read it with the vendor's tool (npu-smi, mthreads-gmi), {_GUARD}")),
    "device_memory_used": "the device's used bytes are `total - free` of `portlayer.mem_get_info()`",
    "Stream.priority_range": f"stream priorities are CUDA's: create streams without `priority=`, {_GUARD}",
}

GRAPHS = frozenset({"graph", "graphs", "CUDAGraph", "make_graphed_callables", "graph_pool_handle"})

AMP_NAMES = frozenset(f"amp.{name}" for name in AMP)

# Submodules whose members the tables above convert: `from torch.cuda import amp` is no site of its own.
NAMESPACES = frozenset({"amp", "nvtx"} | {submodule.rstrip(".") for submodule in REEXPORTING_SUBMODULES})

TENSOR_TYPES = {
    "FloatTensor": "float32",
    "DoubleTensor": "float64",
    "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16",
    "ByteTensor": "uint8",
    "CharTensor": "int8",
    "ShortTensor": "int16",
    "IntTensor": "int32",
    "LongTensor": "int64",
    "BoolTensor": "bool",
}


def normalise(suffix: str) -> str:
    """The name after `torch.cuda.`, with re-exporting submodules folded away."""
    for submodule in REEXPORTING_SUBMODULES:
        if suffix.startswith(submodule):
            return suffix[len(submodule):]
    return suffix
