from portlayer import stand_ins
from portlayer.backends.base import Backend

BACKEND = Backend(
    name="cpu",
    dist_backend="gloo",
    # No variable selects devices here, but callers index the environment with the answer
    # (`env[portlayer.visible_devices_env()] = ids` in a launcher): the CUDA script's own variable is harmless.
    visible_devices_env="CUDA_VISIBLE_DEVICES",
    is_accelerator=False,
    # Its cpu accelerator talks gloo where oneCCL is absent.
    deepspeed_accelerator="cpu",
    count_devices=lambda module: 1,
    overrides={
        # Questions answer as torch.cuda's do on a host without CUDA, so a program's own cpu fallback runs
        # and no accelerator-only path (pin_memory, CUDA graphs, "you have a GPU" warnings) switches on.
        # Placement (`device()`, `device_type()`) still answers the cpu.
        "is_available": lambda module: lambda: False,
        "device_count": lambda module: lambda: 0,
        "get_device_name": lambda module: stand_ins.cpu_name,
        "get_device_properties": lambda module: stand_ins.cpu_properties,
        "is_bf16_supported": lambda module: lambda including_emulation=True: True,
    },
    # torch.cpu has these names, but current_device() answers "cpu" where code written for torch.cuda expects
    # an index, and its Event takes no arguments and cannot time: the host stand-ins answer instead.
    host_fallbacks=frozenset({"current_device", "Event", "Stream", "stream", "current_stream", "default_stream"}),
    fused_optimizers=True,
)
