from portlayer.backends.base import Backend, EnvAlias, VendorApi, shared_allocator_settings

# MCCL is derived from NCCL and reads the same settings under its own prefix.
_MCCL_SETTINGS = (
    "SOCKET_IFNAME",
    "SOCKET_FAMILY",
    "IB_HCA",
    "IB_DISABLE",
    "P2P_DISABLE",
    "BUFFSIZE",
    "DEBUG",
)

_NO_FLOAT64 = "Moore Threads GPUs emulate float64 or lack kernels for it"

BACKEND = Backend(
    name="musa",
    dist_backend="mccl",
    visible_devices_env="MUSA_VISIBLE_DEVICES",
    vendor_module="torch_musa",
    install_hint="install the torch_musa wheel from Moore Threads beside portlayer",
    # torch_musa's caching allocator reads torch's settings (expandable_segments, max_split_size_mb, ...)
    # from its own variable (MUSAAllocatorConfig.cpp, which also takes their `cuda` spellings).
    env_aliases=tuple(EnvAlias(f"NCCL_{s}", f"MCCL_{s}") for s in _MCCL_SETTINGS)
    + (EnvAlias("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_MUSA_ALLOC_CONF", accepts=shared_allocator_settings),),
    dtype_risks={"float64": _NO_FLOAT64, "complex128": _NO_FLOAT64},
    smi_command="mthreads-gmi",
    # DeepSpeed has no musa accelerator (DS_ACCELERATOR=musa stops its import): portlayer's answers. Its
    # launcher then forwards MCCL's settings and the MUSA runtime's, as it forwards NCCL_* on cuda.
    launcher_env_prefixes=("MCCL", "MUSA"),
    # torch_musa's muDNN switches carry cuDNN's names.
    vendor_api=VendorApi(
        cudnn_flags={
            "benchmark": "{torch}.backends.mudnn.benchmark",
            "allow_tf32": "{torch}.backends.mudnn.allow_tf32",
        }
    ),
)
