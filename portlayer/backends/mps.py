from portlayer.backends.base import Backend


def _count(module) -> int:
    import torch

    return int(torch.backends.mps.is_available())


def _mem_get_info(module):
    def mem_get_info(device=None):
        total = module.recommended_max_memory()
        return max(total - module.driver_allocated_memory(), 0), total

    return mem_get_info


# torch.mps tracks current allocations only: the peak figures report the current ones.
def _allocated(module):
    return lambda device=None: module.current_allocated_memory()


def _reserved(module):
    return lambda device=None: module.driver_allocated_memory()


BACKEND = Backend(
    name="mps",
    dist_backend="gloo",
    # No variable selects devices here, but callers index the environment with the answer
    # (`env[portlayer.visible_devices_env()] = ids` in a launcher): the CUDA script's own variable is harmless.
    visible_devices_env="CUDA_VISIBLE_DEVICES",
    count_devices=_count,
    deepspeed_accelerator="mps",
    overrides={
        "memory_allocated": _allocated,
        "max_memory_allocated": _allocated,
        "memory_reserved": _reserved,
        "max_memory_reserved": _reserved,
        "mem_get_info": _mem_get_info,
    },
    fused_optimizers=True,
)
