"""Two processes, the collective portlayer picks, a real DistributedDataParallel step, on a host without
accelerators (gloo): two ranks need two devices, which a host with one GPU does not have."""

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import portlayer

WORLD_SIZE = 2


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def _batch(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(100 + rank)
    return torch.randn(4, 6, generator=generator), torch.randn(4, 1, generator=generator)


def _train_one_step(rank: int, init_file: str, out_dir: str) -> None:
    dist.init_process_group(
        portlayer.dist_backend(), init_method=f"file://{init_file}", rank=rank, world_size=WORLD_SIZE
    )
    device = portlayer.device(rank)
    model = torch.nn.parallel.DistributedDataParallel(
        _model().to(device), device_ids=portlayer.ddp_device_ids(device)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    inputs, targets = (t.to(device) for t in _batch(rank))
    torch.nn.functional.mse_loss(model(inputs), targets).backward()
    optimizer.step()
    portlayer.synchronize()
    torch.save({k: v.cpu() for k, v in model.module.state_dict().items()}, f"{out_dir}/rank{rank}.pt")
    dist.destroy_process_group()


def test_ddp_step_with_portlayers_collective_averages_gradients_across_ranks(tmp_path, without_accelerators):
    mp.spawn(_train_one_step, args=(str(tmp_path / "init"), str(tmp_path)), nprocs=WORLD_SIZE, join=True)
    states = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(WORLD_SIZE)]

    # The reference: one process, the mean of both ranks' losses (what DDP's gradient averaging computes).
    reference = _model()
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.5)
    losses = [torch.nn.functional.mse_loss(reference(x), y) for x, y in map(_batch, range(WORLD_SIZE))]
    (sum(losses) / WORLD_SIZE).backward()
    optimizer.step()

    for name, expected in reference.state_dict().items():
        assert torch.equal(states[0][name], states[1][name]), name
        torch.testing.assert_close(states[0][name], expected, rtol=1e-6, atol=1e-7)
    assert not torch.equal(states[0]["0.weight"], _model().state_dict()["0.weight"])
