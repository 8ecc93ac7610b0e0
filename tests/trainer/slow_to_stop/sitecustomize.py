"""On the PYTHONPATH of a test's `portlayer parity run`: each rank (torchrun sets LOCAL_RANK) ignores SIGTERM, as a
trainer that saves a checkpoint on SIGTERM takes its time over it. Only SIGKILL ends it."""

import os
import signal

if "LOCAL_RANK" in os.environ:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
