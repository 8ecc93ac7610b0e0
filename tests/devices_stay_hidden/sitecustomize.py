"""On the PYTHONPATH of a process that models a host without accelerators through a launcher that sets the
visible-devices variable itself (tests/accelerator.py, `hidden_from_launched()`): accelerate's `gpu_ids: 0,1` and
DeepSpeed's `--num_gpus 2` write CUDA_VISIBLE_DEVICES=0,1 for the processes they start, which shows a GPU host's
devices again. Each interpreter empties the variables named in PORTLAYER_TESTS_HIDDEN_DEVICES at its start, before anything
can read them; on a host without accelerators there is nothing to show, so nothing else changes."""

import os

for name in filter(None, os.environ.get("PORTLAYER_TESTS_HIDDEN_DEVICES", "").split(",")):
    os.environ[name] = ""
