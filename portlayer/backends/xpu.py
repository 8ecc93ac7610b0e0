from portlayer.backends.base import Backend

# Intel GPUs are upstream in torch (2.4+), collective "xccl" from torch 2.8. oneCCL's network settings
# have no one-to-one NCCL names, so no variables are translated.
BACKEND = Backend(
    name="xpu",
    dist_backend="xccl",
    visible_devices_env="ZE_AFFINITY_MASK",
    deepspeed_accelerator="xpu",
    fused_optimizers=True,
)
