"""`hccl` / `mccl` on the stand-in device: gloo underneath, every collective a training job or a library
(HF Trainer, accelerate) calls, on 2 ranks, with results worked out by hand."""

import json

import pytest

from tests.fake_device import VENDORS, torchrun

SCRIPT = r"""
import json, os, sys
import torch, torch.distributed as dist

vendor = sys.argv[1]
__import__(f"torch_{vendor}")
dist.init_process_group({"npu": "hccl", "musa": "mccl"}[vendor])
rank = dist.get_rank()
device = torch.device(vendor, rank)
getattr(torch, vendor).set_device(device)
seen = {"backend": dist.get_backend()}

summed = torch.tensor([rank + 1.0, 10.0], device=device)
dist.all_reduce(summed)
seen["all_reduce"] = summed.tolist()                              # [1 + 2, 10 + 10]
gathered = torch.empty(4, device=device)
dist.all_gather_into_tensor(gathered, torch.tensor([rank, rank + 0.5], device=device))
seen["all_gather_into_tensor"] = gathered.tolist()
pieces = [torch.zeros(1, device=device) for _ in range(2)]
dist.all_gather(pieces, torch.tensor([rank * 3.0], device=device))
seen["all_gather"] = [p.item() for p in pieces]
scattered = torch.empty(2, device=device)
dist.reduce_scatter_tensor(scattered, torch.arange(4.0, device=device) + rank)
seen["reduce_scatter_tensor"] = scattered.tolist()                # rank r gets sum over ranks of its half
exchanged = torch.empty(2, device=device)
dist.all_to_all_single(exchanged, torch.tensor([10.0 * rank, 10.0 * rank + 1], device=device))
seen["all_to_all_single"] = exchanged.tolist()
root = torch.tensor([rank + 7.0], device=device)
dist.broadcast(root, src=1)
seen["broadcast"] = root.tolist()
objects = [None, None]
dist.all_gather_object(objects, {"rank": rank})
seen["all_gather_object"] = objects
dist.barrier()
if rank == 0:
    print(json.dumps(seen))
dist.destroy_process_group()
"""


@pytest.mark.parametrize("vendor", sorted(VENDORS))
def test_collectives_on_two_ranks(vendor, tmp_path, stand_in_device):
    script = tmp_path / "collectives.py"
    script.write_text(SCRIPT)
    run = torchrun(vendor, script, vendor)
    assert run.returncode == 0, run.stdout[-3000:]
    seen = json.loads(next(line for line in run.stdout.splitlines() if line.startswith("{")))
    assert seen == {
        "backend": VENDORS[vendor].dist_backend,
        "all_reduce": [3.0, 20.0],
        "all_gather_into_tensor": [0.0, 0.5, 1.0, 1.5],
        "all_gather": [0.0, 3.0],
        "reduce_scatter_tensor": [0.0 + 1.0, 1.0 + 2.0],
        "all_to_all_single": [0.0, 10.0],
        "broadcast": [8.0],
        "all_gather_object": [{"rank": 0}, {"rank": 1}],
    }
