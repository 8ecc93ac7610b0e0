"""apex.parallel.DistributedDataParallel rewritten to torch's averages gradients over the ranks as apex's
did: gradient_average=True divides the all-reduced sum by the world size
(NVIDIA/apex@e13873de, the last commit with apex.parallel: apex/parallel/distributed.py#L164-L176 for the
defaults, #L445-L458 for the averaging). delay_allreduce only chose when the all-reduce ran. Two gloo
processes run the migrated program; one process computes apex's documented result."""

import gc

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from portlayer.migrate.engine import migrate_source

WORLD_SIZE = 2
PROGRAM = """
from apex.optimizers import FusedSGD
from apex.parallel import DistributedDataParallel as DDP

model = DDP(model, delay_allreduce=True, message_size=1000)
optimizer = FusedSGD(model.parameters(), lr=0.5, momentum=0.9)
"""


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def _batch(rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(4, 6, generator=generator), torch.randn(4, 1, generator=generator)


def _train(rank: int, code: str, init_file: str, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD_SIZE)
    namespace = {"model": _model()}
    exec(compile(code, "<migrated>", "exec"), namespace)
    model, optimizer = namespace["model"], namespace["optimizer"]
    for step in range(3):
        optimizer.zero_grad()
        inputs, targets = _batch(rank, step)
        torch.nn.functional.mse_loss(model(inputs), targets).backward()
        optimizer.step()
    torch.save(model.module.state_dict(), f"{out_dir}/rank{rank}.pt")
    del model, namespace
    # DDP's hooks keep the model in reference cycles: free its reducer before the group, not while the
    # interpreter exits (after torch's own exit hook, where a gloo rank aborts now and then).
    gc.collect()
    dist.destroy_process_group()


def test_apex_ddp_rewrite_averages_gradients_like_apex(tmp_path):
    code = migrate_source(PROGRAM, "torch").code
    assert "apex" not in code
    mp.spawn(_train, args=(code, str(tmp_path / "init"), str(tmp_path)), nprocs=WORLD_SIZE, join=True)
    states = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(WORLD_SIZE)]

    reference = _model()
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.5, momentum=0.9)
    for step in range(3):
        optimizer.zero_grad()
        losses = [torch.nn.functional.mse_loss(reference(x), y) for x, y in (_batch(r, step) for r in range(WORLD_SIZE))]
        (sum(losses) / WORLD_SIZE).backward()  # apex: all-reduce the sum, then divide by the world size
        optimizer.step()
    for name, expected in reference.state_dict().items():
        assert torch.equal(states[0][name], states[1][name]), name
        torch.testing.assert_close(states[0][name], expected, rtol=1e-5, atol=1e-6)
