"""One rank of a training step under a strategy on the stand-in npu, measured by the device's allocator.

    torchrun --nproc_per_node 2 strategy_step.py CONFIG.json STRATEGY BATCH SEQ_LEN [--lora-r R] [--tp T] [--sp]
        [--pp P --pp-schedule 1f1b|gpipe --grad-accum M] [...]

The model and batch are preflight's for the same arguments (`model_source`): built on the cpu from seed 0,
moved to the rank's device; the strategy is applied by the trainer's own code (`portlayer.strategies.prepare`:
its DDP, its fully_shard per block, its DeepSpeed engine and config; with --tp, its tensor parallel over the
groups the trainer forms, `Layout.groups`), with AdamW and gradient clipping.
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
from portlayer.strategies.layout import Layout
from portlayer.strategies.parallel import Setup


def measure(args) -> int:
    source = from_config_file(args.config, batch_size=args.batch_size, seq_len=args.seq_len, overrides={})
    training = Training("fp32", args.strategy, dist.get_world_size(), args.lora_r, args.gradient_checkpointing)
    torch.manual_seed(0)
    device = torch.device("npu", dist.get_rank())
    model = source.build(training).to(device)
    layout = Layout(args.tp, args.pp, args.sp, args.pp_schedule)
    data_group, tensor_group, pipeline_group = groups(layout)
    setup = Setup(
        group=data_group, tensor_group=tensor_group, pipeline_group=pipeline_group, layout=layout, device=device,
        micro_batch=args.batch_size, grad_accum=args.grad_accum, seq_len=args.seq_len,
        make_optimizer=lambda parameters: torch.optim.AdamW(
            trainable(parameters), lr=source.lr, weight_decay=source.weight_decay),
        make_scheduler=lambda optimizer: torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0),
        max_grad_norm=source.max_grad_norm,
    )
    # The trainer's own code applies the strategy: DDP, fully_shard per block, DeepSpeed's engine, the layout.
    parallel = strategies.prepare(strategies.get_strategy(args.strategy), model, setup)
    batch = {key: value.to(device) for key, value in source.batch.items()}

    def step():
        if layout.splits:
            parallel.forward_backward([batch] * args.grad_accum)  # a pipeline's micro-batches
        else:
            parallel.backward(parallel.model(**batch).loss)
        parallel.step()

    step()
    torch.npu.synchronize()
    # The first step's garbage in reference cycles freed first: when Python's collector runs depends on the
    # process's history (a rank forked from the warm interpreter has another), and once, in a whole suite, a
    # --tp 2 x 2 copies rank measured one whole-group optimizer temporary more (+1.05 MB of 10 MB).
    gc.collect()
    torch.npu.reset_peak_memory_stats()
    step()
    torch.npu.synchronize()
    return torch.npu.max_memory_allocated()


def trainable(parameters) -> list:
    """The parameters to train, or tensor parallel's groups of them (split and whole) as they are."""
    parameters = list(parameters)
    if parameters and isinstance(parameters[0], dict):
        return parameters
    return [p for p in parameters if p.requires_grad]


def groups(layout: Layout):
    """The data-parallel, tensor-parallel and pipeline groups of this rank, as the trainer forms them (every rank
    makes every group); the whole world and no other group without a split."""
    if not layout.splits:
        return dist.group.WORLD, None, None
    placed = layout.groups(dist.get_world_size())
    data_group, _ = dist.new_subgroups_by_enumeration(placed.data)
    tensor_group = dist.new_subgroups_by_enumeration(placed.tensor)[0] if layout.tensor > 1 else None
    pipeline_group = dist.new_subgroups_by_enumeration(placed.pipeline)[0] if layout.pipeline > 1 else None
    return data_group, tensor_group, pipeline_group


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("strategy")
    parser.add_argument("batch_size", type=int)
    parser.add_argument("seq_len", type=int)
    parser.add_argument("--lora-r", type=int)
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--sp", action="store_true")
    parser.add_argument("--pp", type=int, default=1)
    parser.add_argument("--pp-schedule", default="1f1b")
    parser.add_argument("--grad-accum", type=int, default=1)
    args = parser.parse_args()

    dist.init_process_group("hccl")
    torch.npu.set_device(dist.get_rank())
    peak = measure(args)
    print(json.dumps({"rank": dist.get_rank(), "peak": peak}), flush=True)
    gc.collect()  # DDP's hooks keep the model in reference cycles: free its reducer before the group
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
