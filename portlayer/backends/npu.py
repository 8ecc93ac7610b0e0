import math

from portlayer.backends.base import Backend, EnvAlias
from portlayer.fallbacks import FALLBACKS


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
    ),
    deterministic_env={"HCCL_DETERMINISTIC": "true"},
    overrides={
        # torch_npu's get_device_capability warns and returns None ("CANN has no such concept"); code
        # written for CUDA indexes or unpacks the answer. Answer as for any backend without the concept.
        "get_device_capability": lambda module: FALLBACKS["get_device_capability"](None, module),
    },
)
