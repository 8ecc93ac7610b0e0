"""What the codemod knows about `torch.cuda`'s names, as tables. A name in none of them is reported
(PL401), never guessed."""

from __future__ import annotations

from portlayer.api import AMP, MIRRORED

# Submodules whose functions torch.cuda re-exports: `torch.cuda.memory.memory_allocated` is
# `torch.cuda.memory_allocated`.
REEXPORTING_SUBMODULES = ("memory.", "random.", "streams.")

# Names portlayer mirrors, plus torch.cuda.device (portlayer.device doubles as its context manager).
PORTLAYER = frozenset(MIRRORED) | {"device"}

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
# torch.cpu, what `torch.get_device_module()` returns there, has none of them (minGPT's set_seed).
SEEDING_WITHOUT_ACCELERATOR = {"manual_seed": "None", "manual_seed_all": "None", "seed": "None"}

# Device-generic classes in torch itself.
TORCH_GENERIC = {"OutOfMemoryError": "OutOfMemoryError", "nvtx.range": "profiler.record_function"}

# torch.cuda.nvtx's markers, which only portlayer has everywhere (`portlayer.nvtx`: NVTX on cuda, torch profiler
# ranges elsewhere; a CPU build of torch, the vendors', has no NVTX and raises). Upstream torch and the vendors have no
# push/pop: reported on those targets.
NVTX = frozenset({"nvtx.range_push", "nvtx.range_pop", "nvtx.range_start", "nvtx.range_end", "nvtx.mark"})

GRAPHS = frozenset({"graph", "graphs", "CUDAGraph", "make_graphed_callables", "graph_pool_handle",
                    "is_current_stream_capturing"})

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
