"""One rank of a training step under a strategy on the stand-in npu, measured by the device's allocator.

    torchrun --nproc_per_node 2 strategy_step.py CONFIG.json STRATEGY BATCH SEQ_LEN [--lora-r R] [...]

The model, batch and optimizer are preflight's for the same arguments (`model_source`): built on the cpu
from seed 0, moved to the rank's device, wrapped by the strategy, AdamW (foreach) and gradient clipping.
The first step creates AdamW's state; the second is measured: the allocator's peak over it (every byte the
device holds then: weights, gradients, optimizer state, activations, buffers, the batch). Prints one JSON
line per rank.
"""

import argparse
import gc
import json

import torch
import torch.distributed as dist
import torch_npu  # noqa: F401 - the stand-in plugin: registers the npu device and hccl

from portlayer.preflight.model_source import ModelSource, Training, from_config_file
from portlayer.strategies import get_strategy


def torch_step(model, source: ModelSource, strategy: str, rank: int):
    """A step of torch's DDP or FSDP2 (fully_shard on each decoder layer, then the model)."""
    if strategy == "ddp":
        runner = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    else:
        from torch.distributed.device_mesh import DeviceMesh
        from torch.distributed.fsdp import fully_shard

        # The mesh over the default group: the stand-in's hccl names no new groups (init_device_mesh makes one).
        mesh = DeviceMesh.from_group(dist.group.WORLD, "npu")
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        runner = fully_shard(model, mesh=mesh)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=source.lr, weight_decay=source.weight_decay, foreach=True)

    def step(batch):
        runner(**batch).loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, source.max_grad_norm, foreach=True)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def deepspeed_step(model, source: ModelSource, stage: int, batch_size: int):
    """A step of DeepSpeed's engine at ZeRO `stage`, with the same AdamW and clipping."""
    import deepspeed

    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=source.lr, weight_decay=source.weight_decay, foreach=True)
    config = {"train_micro_batch_size_per_gpu": batch_size, "gradient_clipping": source.max_grad_norm,
              "zero_optimization": {"stage": stage}}
    engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)

    def step(batch):
        engine.backward(engine(**batch).loss)
        engine.step()

    return step


def measure(args) -> int:
    rank = dist.get_rank()
    source = from_config_file(args.config, batch_size=args.batch_size, seq_len=args.seq_len, overrides={})
    training = Training("fp32", args.strategy, dist.get_world_size(), args.lora_r, args.gradient_checkpointing)
    torch.manual_seed(0)
    model = source.build(training).to("npu")
    strategy = get_strategy(args.strategy)
    if strategy.engine == "deepspeed":
        step = deepspeed_step(model, source, strategy.zero_stage, args.batch_size)
    else:
        step = torch_step(model, source, args.strategy, rank)
    batch = {key: value.to("npu") for key, value in source.batch.items()}
    step(batch)
    torch.npu.synchronize()
    torch.npu.reset_peak_memory_stats()
    step(batch)
    torch.npu.synchronize()
    return torch.npu.max_memory_allocated()


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
    torch.npu.set_device(dist.get_rank())
    peak = measure(args)
    print(json.dumps({"rank": dist.get_rank(), "peak": peak}), flush=True)
    gc.collect()  # DDP's hooks keep the model in reference cycles: free its reducer before the group
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
