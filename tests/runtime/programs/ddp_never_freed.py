"""Two ranks train a DDP model they never free, as many real scripts do; `WAY` is "neutral" (portlayer's
API, the way migrated code reads) or "dropin" (`import portlayer.torch as torch`). Each rank prints whether
its model's reducer was freed at `destroy_process_group` and by the time the interpreter finalises."""

import atexit
import os
import sys
import weakref

WAY = sys.argv[1]
reducer = None


def say(line: str) -> None:
    # One write per line: the two ranks share torchrun's stdout, and print's text and newline can interleave.
    os.write(sys.stdout.fileno(), f"{line}\n".encode())


# Registered before portlayer is first used, so it runs after portlayer's own exit handler (atexit: last in,
# first out), and before the interpreter finalises.
@atexit.register
def report_at_exit():
    say(f"freed by exit: {reducer() is None}")


if WAY == "dropin":
    import portlayer.torch as torch

    collective = "nccl"  # the drop-in retargets it
else:
    import torch

    import portlayer

    collective = portlayer.dist_backend()
import torch.distributed as dist  # noqa: E402 (after the way chose its torch)
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

dist.init_process_group(collective)
model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
reducer = weakref.ref(model.reducer)
dist.destroy_process_group()
say(f"freed at destroy: {reducer() is None}")
