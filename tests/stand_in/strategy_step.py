"""One rank of a training step under a strategy on the stand-in npu, measured by the device's allocator.

    torchrun --nproc_per_node 2 strategy_step.py CONFIG.json STRATEGY BATCH SEQ_LEN [--lora-r R] [...]

The model, batch and optimizer are preflight's for the same arguments (`model_source`): built on the cpu
from seed 0, moved to the rank's device, wrapped by the strategy, AdamW (foreach) and gradient clipping.
The first step creates AdamW's state; the second is measured: the allocator's peak over it (every byte the
device holds then: weights, gradients, optimizer state, activations, buffers, the batch). Prints one JSON
line per rank.
"""

import argparse
import json

import torch
import torch.distributed as dist
import torch_npu  # noqa: F401 - the stand-in plugin: registers the npu device and hccl

from portlayer.preflight.model_source import Training, from_config_file


def wrap(model, strategy: str, rank: int):
    if strategy == "ddp":
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    if strategy == "fsdp2":
        from torch.distributed.device_mesh import DeviceMesh
        from torch.distributed.fsdp import fully_shard

        # The mesh over the default group: the stand-in's hccl names no new groups (init_device_mesh makes one).
        mesh = DeviceMesh.from_group(dist.group.WORLD, "npu")
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        return fully_shard(model, mesh=mesh)
    raise SystemExit(f"strategy {strategy} is not run here")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("strategy")
    parser.add_argument("batch_size", type=int)
    parser.add_argument("seq_len", type=int)
    parser.add_argument("--lora-r", type=int)
    parser.add_argument("--gradient-checkpointing", action="store_true")
    args = parser.parse_args()

    dist.init_process_group("hccl")
    rank = dist.get_rank()
    torch.npu.set_device(rank)
    source = from_config_file(args.config, batch_size=args.batch_size, seq_len=args.seq_len, overrides={})
    training = Training("fp32", args.strategy, dist.get_world_size(), args.lora_r, args.gradient_checkpointing)
    torch.manual_seed(0)
    model = source.build(training).to("npu")
    runner = wrap(model, args.strategy, rank)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=source.lr,
                                  weight_decay=source.weight_decay, foreach=True)
    batch = {key: value.to("npu") for key, value in source.batch.items()}

    def step():
        runner(**batch).loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], source.max_grad_norm,
                                       foreach=True)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()
    torch.npu.synchronize()
    torch.npu.reset_peak_memory_stats()
    step()
    torch.npu.synchronize()
    print(json.dumps({"rank": rank, "peak": torch.npu.max_memory_allocated()}), flush=True)
    del runner, model, optimizer
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
