"""Loaded (as `sitecustomize`) by the programs the run-after-migrate suite runs on the torch target on the host.

A script that never frees its DistributedDataParallel model (pytorch/examples' ddp/example.py keeps it in a
reference cycle through DDP's hooks) has its reducer, and with it the gloo process group, freed only by the
cyclic collector; if that happens after torch's own exit hook (registered from its C++ when torch is
imported), a gloo rank aborts now and then with "terminate called without an active exception" (exit -6)
after training correctly: 6 runs in 30 of that example. That race is torch's, on its cpu gloo backend, and
the torch target adds no dependency that could help: portlayer's own ways free the reducer themselves (the
neutral runtime at exit, the drop-in in `destroy_process_group`; tests/runtime/test_ddp_never_freed.py).
Here torch is imported first, so that the collection registered after it runs before its hook (atexit: last
in, first out): the suite judges the port and not the race. The programs import torch anyway.
"""

import atexit
import gc

import torch  # noqa: F401  (its exit hook first; see above)

atexit.register(gc.collect)
