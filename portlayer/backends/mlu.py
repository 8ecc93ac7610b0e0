from portlayer.backends.base import Backend, EnvAlias

BACKEND = Backend(
    name="mlu",
    dist_backend="cncl",
    visible_devices_env="MLU_VISIBLE_DEVICES",
    vendor_module="torch_mlu",
    install_hint="install the torch_mlu wheel from Cambricon, on a host with Neuware",
    env_aliases=(EnvAlias("NCCL_SOCKET_IFNAME", "CNCL_SOCKET_IFNAME"),),
    deepspeed_accelerator="mlu",
)
