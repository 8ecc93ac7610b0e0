"""Tecorigin SDAA. Where each fact comes from:

- plugin `torch_sdaa`, which registers `torch.sdaa`: DeepSpeed `accelerator/real_accelerator.py`; accelerate
  `src/accelerate/utils/imports.py` (`is_sdaa_available`).
- collective `tccl`: DeepSpeed `accelerator/sdaa_accelerator.py` (`_communication_backend_name`); accelerate
  `state.py` (`_prepare_backend`).
- visible devices `SDAA_VISIBLE_DEVICES`: DeepSpeed `sdaa_accelerator.py` (`visible_devices_envs`); accelerate
  `utils/launch.py`.
TCCL's own settings are not documented there (DeepSpeed passes NCCL_* on as they are): nothing is translated.
"""

from portlayer.backends.base import Backend

BACKEND = Backend(
    name="sdaa",
    dist_backend="tccl",
    visible_devices_env="SDAA_VISIBLE_DEVICES",
    vendor_module="torch_sdaa",
    install_hint="install the torch_sdaa wheel from Tecorigin beside portlayer",
    deepspeed_accelerator="sdaa",
)
