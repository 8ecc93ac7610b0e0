from portlayer.backends.base import Backend, EnvAlias

BACKEND = Backend(
    name="mlu",
    dist_backend="cncl",
    visible_devices_env="MLU_VISIBLE_DEVICES",
    vendor_module="torch_mlu",
    install_hint="install Cambricon's torch_mlu wheel (needs the Neuware SDK on the host)",
    env_aliases=(EnvAlias("NCCL_SOCKET_IFNAME", "CNCL_SOCKET_IFNAME"),),
)
