"""Intel Gaudi. Where each fact comes from:

- plugin `habana_frameworks.torch`, which registers `torch.hpu`: accelerate `src/accelerate/utils/imports.py`
  (`is_hpu_available`); DeepSpeed `accelerator/real_accelerator.py` imports `habana_frameworks.torch.hpu`.
- collective `hccl` (Gaudi's own HCCL, not Ascend's), registered by importing
  `habana_frameworks.torch.distributed.hccl`: DeepSpeed `accelerator/hpu_accelerator.py`
  (`_communication_backend_name`); accelerate `utils/imports.py` (`is_hpu_available(init_hccl=True)`), `state.py`.
- visible devices `HABANA_VISIBLE_MODULES` (module ids, one per local rank): accelerate `utils/launch.py`;
  https://docs.habana.ai/en/latest/PyTorch/PyTorch_Scaling_Guide/Gaudi_Assignment.html
- dispatch key `HPU`: torch has a key of Gaudi's own (`c10/core/DispatchKey.h`), so the plugin needs no PrivateUse1.
- dtypes: Float64 and Complex64 "No" in https://docs.habana.ai/en/latest/PyTorch/Reference/PyTorch_Support_Matrix.html
- `hl-smi`: https://docs.habana.ai/en/latest/Management_and_Monitoring/Embedded_System_Tools_Guide/System_Management_Interface_Tool.html
"""

from portlayer.backends.base import Backend

_NO_FLOAT64 = "Gaudi's PyTorch support matrix lists Float64 and Complex64 as unsupported"

BACKEND = Backend(
    name="hpu",
    dist_backend="hccl",
    visible_devices_env="HABANA_VISIBLE_MODULES",
    vendor_module="habana_frameworks.torch",
    install_hint="install Intel Gaudi's PyTorch packages (habana_frameworks), on a host with the Gaudi driver",
    collective_module="habana_frameworks.torch.distributed.hccl",
    dispatch_key="HPU",
    dtype_risks={"float64": _NO_FLOAT64, "complex64": _NO_FLOAT64, "complex128": _NO_FLOAT64},
    smi_command="hl-smi",
    deepspeed_accelerator="hpu",
    fused_optimizers=True,
)
