"""Loaded (as `sitecustomize`) by the programs the run-after-migrate suite runs on the torch target on the host.

A script that never frees its DistributedDataParallel model (pytorch/examples' ddp/example.py keeps it in a
reference cycle through DDP's hooks) has its reducer, and with it gloo's worker threads, destroyed only while
the interpreter finalises; now and then a gloo rank then aborts with "terminate called without an active
exception" (exit -6) after training correctly. That race is torch's, on its cpu gloo backend, and the torch
target adds no dependency that could help: portlayer's own ways free the reducer themselves (the neutral
runtime at exit, the drop-in in `destroy_process_group`; tests/runtime/test_ddp_never_freed.py). Here the cycle
is collected at exit, before finalisation, so that the suite judges the port and not the race.
"""

import atexit
import gc

atexit.register(gc.collect)
