from __future__ import annotations

import os

from portlayer.backends.base import Backend


def set_deterministic(backend: Backend, on: bool = True, warn_only: bool = False) -> None:
    """Deterministic algorithms plus the backend's own switches.

    The environment switches (`CUBLAS_WORKSPACE_CONFIG`, `HCCL_DETERMINISTIC`) are read when the math
    library or the collective starts: call this before the first kernel and before
    `init_process_group`. A value the user set is kept.
    """
    import torch

    if on:
        for name, value in backend.deterministic_env.items():
            os.environ.setdefault(name, value)
    torch.use_deterministic_algorithms(on, warn_only=warn_only)
    if backend.deterministic_hook is not None:
        backend.deterministic_hook(on)
