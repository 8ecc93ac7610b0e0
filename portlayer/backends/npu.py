import math

from portlayer.backends.base import Backend, EnvAlias, VendorApi, shared_allocator_settings

_NO_FLOAT64 = "Ascend NPUs have no float64 compute units: kernels reject it or run on the AI CPU"


def _bytes_to_mib(value: str) -> str:
    # NCCL_BUFFSIZE is in bytes, HCCL_BUFFSIZE in MiB.
    return str(max(1, math.ceil(int(value) / 2**20)))


BACKEND = Backend(
    name="npu",
    dist_backend="hccl",
    visible_devices_env="ASCEND_RT_VISIBLE_DEVICES",
    vendor_module="torch_npu",
    install_hint="pip install torch_npu, on a host with Ascend CANN",
    env_aliases=(
        EnvAlias("NCCL_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME"),
        EnvAlias("NCCL_SOCKET_FAMILY", "HCCL_SOCKET_FAMILY"),
        EnvAlias("NCCL_BUFFSIZE", "HCCL_BUFFSIZE", _bytes_to_mib),
        # torch_npu's caching allocator reads torch's settings (expandable_segments, max_split_size_mb,
        # garbage_collection_threshold, roundup_power2_divisions) from its own variable (NPUAllocatorConfig.h).
        EnvAlias("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NPU_ALLOC_CONF", accepts=shared_allocator_settings),
    ),
    deterministic_env={"HCCL_DETERMINISTIC": "true"},
    dtype_risks={"float64": _NO_FLOAT64, "complex128": _NO_FLOAT64},
    smi_command="npu-smi info",
    vendor_api=VendorApi(),
    deepspeed_accelerator="npu",
    # DeepSpeed's npu op builders read it (they stop with "KeyError: 'ASCEND_HOME_PATH'" without it).
    required_env={"ASCEND_HOME_PATH": "CANN's set_env.sh sets it"},
    # torch_npu's get_device_capability warns and returns None ("CANN has no such concept"); code written for
    # CUDA indexes or unpacks the answer. Answer as for any backend without the concept.
    host_fallbacks=frozenset({"get_device_capability"}),
)
