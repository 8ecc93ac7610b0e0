from portlayer.backends.base import Backend


def _cudnn_deterministic(on: bool) -> None:
    import torch

    torch.backends.cudnn.deterministic = on
    if on:
        torch.backends.cudnn.benchmark = False


# torch.cuda.device_count() (the default probe) asks NVML first: probing neither initialises CUDA
# nor poisons fork.
BACKEND = Backend(
    name="cuda",
    dist_backend="nccl",
    visible_devices_env="CUDA_VISIBLE_DEVICES",
    deterministic_env={"CUBLAS_WORKSPACE_CONFIG": ":4096:8"},
    deterministic_hook=_cudnn_deterministic,
    deepspeed_accelerator="cuda",
    fused_optimizers=True,
)
