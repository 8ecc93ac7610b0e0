"""On the PYTHONPATH of a test's `portlayer parity run`: each rank ignores SIGTERM, as a trainer that saves a
checkpoint on SIGTERM takes its time over it. Only SIGKILL ends it. A rank is a process torchrun started (it sets
LOCAL_RANK), or a fork of multiprocessing's fork server (portlayer.train.launch), which passes on what it ignores."""

import os
import signal
import sys

if "LOCAL_RANK" in os.environ or "multiprocessing.forkserver" in " ".join(sys.orig_argv):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
