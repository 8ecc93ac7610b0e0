"""`import portlayer.torch as torch`: the one-line port of a CUDA training script.

This module holds torch's whole namespace (`torch.nn`, `torch.float32`, `torch.Tensor` are torch's own
objects, looked up as fast), except for the few names through which a script asks for CUDA:

- `cuda`: `torch.cuda`'s names answering for the active backend (`dropin/cuda_module.py`);
- `device`, `Generator`, `Event`, `Stream`, the factories' `device=`, `autocast`, `amp`, `GradScaler`,
  `load`'s `map_location`: CUDA devices retargeted to the active backend (`dropin/torch_names.py`).

Importing it also applies `portlayer.patch()` once, for the lines that reach torch another way
(`import torch.distributed as dist`, `DistributedDataParallel(device_ids=…)`, `.cuda()`, `.to("cuda")`);
`portlayer.unpatch()` takes that back. On the cuda backend there is nothing to retarget: every name is
torch's own and nothing is patched. See docs/dropin.md.
"""

import torch as _torch

import portlayer as _portlayer
from portlayer import runtime as _runtime
from portlayer.api import BOUND as _BOUND
from portlayer.dropin import cuda_module as _cuda_module
from portlayer.dropin import patches as _patches
from portlayer.dropin import torch_names as _torch_names
from portlayer.dropin.retarget import Retarget as _Retarget


def _namespace() -> dict:
    selection = _runtime.selection()  # selects the backend first: its plugin adds `torch.npu` & co.
    retarget = _Retarget(selection.backend)
    names = {name: value for name, value in vars(_torch).items() if not name.startswith("__")}
    names.update(__version__=_torch.__version__, __all__=list(getattr(_torch, "__all__", ())))
    if not retarget.identity:
        api = {name: getattr(_portlayer, name) for name in _BOUND}
        names.update(_torch_names.names(retarget))
        names["cuda"] = _cuda_module.build(api, selection.module, retarget)
    return names


globals().update(_namespace())
_patches.patch()


def __getattr__(name):
    # What torch loads lazily (`torch._dynamo`, `torch.onnx`, …) or gains after this module was made.
    try:
        return getattr(_torch, name)
    except AttributeError:
        raise AttributeError(f"module 'portlayer.torch' has no attribute {name!r}") from None


def __dir__():
    return sorted(set(globals()) | set(dir(_torch)))
