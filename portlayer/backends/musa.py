from portlayer.backends.base import Backend, EnvAlias

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

BACKEND = Backend(
    name="musa",
    dist_backend="mccl",
    visible_devices_env="MUSA_VISIBLE_DEVICES",
    vendor_module="torch_musa",
    install_hint="install the torch_musa wheel from Moore Threads beside portlayer",
    env_aliases=tuple(EnvAlias(f"NCCL_{s}", f"MCCL_{s}") for s in _MCCL_SETTINGS),
)
