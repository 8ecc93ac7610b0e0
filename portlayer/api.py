"""The names of portlayer's runtime API, as data.

Kept free of imports so that `import portlayer` stays cheap and the codemod (`migrate/`) can learn the
API by name without loading torch.
"""

# The random-number-generator names among those below.
RNG = ("manual_seed", "manual_seed_all", "seed", "initial_seed", "get_rng_state", "set_rng_state")

# `portlayer.X` behaves like `torch.cuda.X` for each of these, on whichever backend is active.
MIRRORED = (
    "is_available",
    "device_count",
    "current_device",
    "set_device",
    "synchronize",
    *RNG,
    "empty_cache",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "reset_peak_memory_stats",
    "mem_get_info",
    "get_device_name",
    "get_device_properties",
    "get_device_capability",
    "is_bf16_supported",
    "Event",
    "Stream",
    "stream",
    "current_stream",
    "default_stream",
    "is_current_stream_capturing",
)

# torch.cuda's automatic mixed precision pair (`torch.cuda.amp.autocast`, `torch.cuda.amp.GradScaler`).
AMP = ("autocast", "GradScaler")

# What torch.cuda lacks. `device` doubles as torch.cuda.device's context manager: it returns a real
# `torch.device`, which is itself a context manager.
ADDITIONS = (
    "backend",
    "device_type",
    "device",
    "is_accelerator",
    "device_module",
    "dist_backend",
    "ddp_device_ids",
    "visible_devices_env",
    "set_deterministic",
)

# torch.cuda's generator plumbing that RNG trackers reach into (Megatron-LM's `tensor_parallel/random.py`):
# built by portlayer itself (portlayer/generators.py), since the vendors keep `_lazy_call` private, fill
# `default_generators` only when the device starts, and torch.cpu has none of the three. `lazy_call` is
# `torch.cuda._lazy_call`: run a callable once the device is initialised (at once where it is).
GENERATORS = ("default_generators", "init", "lazy_call")

BOUND = MIRRORED + AMP + ADDITIONS + GENERATORS
