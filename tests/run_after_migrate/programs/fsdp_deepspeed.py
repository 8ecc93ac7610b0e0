"""A CUDA scale-out program in the shapes people copy: DeepSpeed's process group, then FSDP1 and FSDP2
(each trains a small regression for a few steps and prints its losses)."""

import deepspeed
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import fully_shard


def batches(steps):
    generator = torch.Generator().manual_seed(dist.get_rank())
    weight = torch.arange(1.0, 9.0)
    for _ in range(steps):
        x = torch.randn(16, 8, generator=generator)
        yield x, x @ weight


def train(model, name, device):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for step, (x, y) in enumerate(batches(12)):
        loss = torch.nn.functional.mse_loss(model(x.to(device)).squeeze(-1), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if dist.get_rank() == 0 and step % 3 == 0:
            print(f"{name} step {step} loss {loss.item():.4f}")
    if dist.get_rank() == 0:
        print(f"{name}: model on {next(model.parameters()).device.type}")


def main():
    deepspeed.init_distributed(dist_backend="nccl")
    torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())
    device = torch.device("cuda", torch.cuda.current_device())

    torch.manual_seed(0)
    fsdp1 = FSDP(torch.nn.Linear(8, 1), device_id=torch.cuda.current_device())
    train(fsdp1, "fsdp1", device)

    torch.manual_seed(0)
    fsdp2 = torch.nn.Linear(8, 1)
    fully_shard(fsdp2, mesh=init_device_mesh("cuda", (dist.get_world_size(),)))
    train(fsdp2, "fsdp2", device)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
