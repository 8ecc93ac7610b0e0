from portlayer import host
from portlayer.backends.base import Backend

BACKEND = Backend(
    name="cpu",
    dist_backend="gloo",
    visible_devices_env="CUDA_VISIBLE_DEVICES",
    is_accelerator=False,
    count_devices=lambda module: 1,
    overrides={
        # Questions answer as torch.cuda's do on a host without CUDA, so a program's own cpu fallback runs
        # and no accelerator-only path (pin_memory, CUDA graphs, "you have a GPU" warnings) switches on.
        # Placement (`device()`, `device_type()`) still answers the cpu.
        "is_available": lambda module: lambda: False,
        "device_count": lambda module: lambda: 0,
        # torch.cpu.current_device() answers "cpu"; code written for torch.cuda expects an index.
        "current_device": lambda module: lambda: 0,
        # torch.cpu.Event takes no arguments and cannot time: use the wall clock.
        "Event": lambda module: host.WallClockEvent,
        "Stream": lambda module: host.HostStream,
        "stream": lambda module: host.stream,
        "current_stream": lambda module: host.current_stream,
        "default_stream": lambda module: host.current_stream,
        "mem_get_info": lambda module: host.memory_info,
        "get_device_name": lambda module: host.cpu_name,
        "get_device_properties": lambda module: host.cpu_properties,
        "is_bf16_supported": lambda module: lambda including_emulation=True: True,
    },
)
