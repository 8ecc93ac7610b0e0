"""Biren SUPA. Where each fact comes from:

- plugin `torch_supa`, which registers `torch.supa`: DeepSpeed `accelerator/real_accelerator.py`, which probes it
  before CUDA because "torch_supa spoofs torch.cuda" (the reason for portlayer's probe order too).
- collective `bccl` (Linux): DeepSpeed `accelerator/supa_accelerator.py` (`_communication_backend_name`).
- visible devices `SUPA_VISIBLE_DEVICES`: DeepSpeed `supa_accelerator.py` (`visible_devices_envs`).
"""

from portlayer.backends.base import Backend

BACKEND = Backend(
    name="supa",
    dist_backend="bccl",
    visible_devices_env="SUPA_VISIBLE_DEVICES",
    vendor_module="torch_supa",
    install_hint="install the torch_supa wheel from Biren beside portlayer",
    deepspeed_accelerator="supa",
)
