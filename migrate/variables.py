"""Which environment variables are CUDA's: one list for the shell scripts and the Python rule alike.

`CUDA_VISIBLE_DEVICES` and `NCCL_*` have vendor counterparts (the backend records in
`portlayer.backends`); the CUDA-only settings below have none on any backend.
"""

from __future__ import annotations

import re

VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
ALLOCATOR_SETTINGS = "PYTORCH_CUDA_ALLOC_CONF"
# Settings of the CUDA driver and of torch's CUDA/NCCL code that no other backend reads (user variables
# such as CUDA_FLAG or CUDA_HOME for building are not among them). PYTORCH_CUDA_ALLOC_CONF is not: the
# vendors' caching allocators read the same settings from their own variable (the backend records).
_CUDA_ONLY = (
    r"CUDA_(?:DEVICE_\w+|LAUNCH_BLOCKING|CACHE_\w+|MODULE_\w+|MPS_\w+|FORCE_\w*JIT|DISABLE_\w*JIT|MANAGED_\w+"
    r"|AUTO_BOOST|SCALE_LAUNCH_QUEUES|ENABLE_COREDUMP_ON_EXCEPTION|COREDUMP_\w+|GRAPHS_\w+)"
    r"|PYTORCH_CUDA_(?!ALLOC_CONF\b)\w+|PYTORCH_NVML_\w+|TORCH_NCCL_\w+|TORCH_CUDNN_\w+"
)
_CUDA_ONLY_NAME = re.compile(_CUDA_ONLY)
# Any of them inside a longer text.
VARIABLE = re.compile(rf"\b(?:{VISIBLE_DEVICES}|{ALLOCATOR_SETTINGS}|NCCL_\w+|{_CUDA_ONLY})\b")


def is_interesting(name: str) -> bool:
    """`name` is a CUDA or NCCL variable: renamed, translated or reported."""
    return VARIABLE.fullmatch(name) is not None


def is_cuda_only(name: str) -> bool:
    """`name` is a setting only CUDA reads: reported on every target."""
    return _CUDA_ONLY_NAME.fullmatch(name) is not None
