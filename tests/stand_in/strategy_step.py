"""One rank of a training step under a strategy on the stand-in npu, measured by the device's allocator.

    torchrun --nproc_per_node 2 strategy_step.py CONFIG.json STRATEGY BATCH SEQ_LEN [--lora-r R] [...]

The model and batch are preflight's for the same arguments (`model_source`): built on the cpu from seed 0,
moved to the rank's device; the strategy is applied by the trainer's own code (`portlayer.strategies.prepare`:
its DDP, its fully_shard per block, its DeepSpeed engine and config), with AdamW and gradient clipping.
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

from portlayer import strategies
from portlayer.preflight.model_source import Training, from_config_file
from portlayer.strategies.parallel import Setup


def measure(args) -> int:
    source = from_config_file(args.config, batch_size=args.batch_size, seq_len=args.seq_len, overrides={})
    training = Training("fp32", args.strategy, dist.get_world_size(), args.lora_r, args.gradient_checkpointing)
    torch.manual_seed(0)
    device = torch.device("npu", dist.get_rank())
    model = source.build(training).to(device)
    setup = Setup(
        group=dist.group.WORLD, device=device, micro_batch=args.batch_size, grad_accum=1,
        make_optimizer=lambda parameters: torch.optim.AdamW(
            [p for p in parameters if p.requires_grad], lr=source.lr, weight_decay=source.weight_decay),
        make_scheduler=lambda optimizer: torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0),
        max_grad_norm=source.max_grad_norm,
    )
    # The trainer's own code applies the strategy: DDP, fully_shard per block, DeepSpeed's engine.
    parallel = strategies.prepare(strategies.get_strategy(args.strategy), model, setup)
    batch = {key: value.to(device) for key, value in source.batch.items()}

    def step():
        parallel.backward(parallel.model(**batch).loss)
        parallel.step()

    step()
    torch.npu.synchronize()
    torch.npu.reset_peak_memory_stats()
    step()
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
