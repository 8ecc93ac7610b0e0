"""Free the gradient reducers of DDP models still alive, while the interpreter can still tear them down.

A `DistributedDataParallel` model's reducer holds its process group, and with it the group's worker
threads. A script that never frees its model (most of them: the model is a global, or DDP's hooks keep it in
reference cycles) keeps both alive past `destroy_process_group()`, and they are torn down while the
interpreter finalises, where a gloo rank aborts now and then with "terminate called without an active
exception". `release()` drops each live model's reducer, and the logger that shares it, so the group goes
when the script lets it go. The drop-in calls it inside `destroy_process_group` (dropin/patches.py), and the
runtime at exit, before the interpreter finalises (runtime.py), for scripts that never destroy their group.
"""

from __future__ import annotations

import gc
import sys


def release(group=None) -> int:
    """Free the reducer of every live DDP model on `group` (every group when None, as
    `destroy_process_group(None)` destroys them all); returns how many. The models cannot train after."""
    ddp = sys.modules.get("torch.nn.parallel.distributed")
    if ddp is None:  # torch imports it with itself: a process without torch has no model to look for
        return 0
    released = 0
    for model in gc.get_objects():
        # type(), not isinstance(): that would read `__class__` of every object, and some warn when read.
        if not issubclass(type(model), ddp.DistributedDataParallel) or "reducer" not in vars(model):
            continue
        if group is None or model.process_group is group:
            del model.reducer
            vars(model).pop("logger", None)  # dist.Logger keeps the reducer too
            released += 1
    return released
