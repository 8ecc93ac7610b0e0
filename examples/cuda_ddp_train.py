"""A CUDA DDP training script in the shape of the usual HuggingFace demo: the input of `portlayer migrate`.

Run on NVIDIA with:  torchrun --nproc_per_node 2 examples/cuda_ddp_train.py --steps 20
It is written for CUDA + NCCL on purpose; nothing in it knows about portlayer.
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import GPT2Config, GPT2LMHeadModel


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--seq_len", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--fp16", action="store_true", help="mixed precision with a gradient scaler")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--losses_out", default=None, help="write rank 0's losses to this JSON file")
    return parser.parse_args()


def timed(fn, *args):
    """Time a step the CUDA way: wait for the queued kernels before reading the clock."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    result = fn(*args)
    torch.cuda.synchronize()
    return result, time.perf_counter() - start


def synthetic_batches(steps, batch_size, seq_len, vocab_size, rank, world_size, seed):
    """Counting sequences (random start, stride 1-3) that a small model learns within a few steps."""
    generator = torch.Generator().manual_seed(seed)
    shape = (steps, world_size, batch_size, 1)
    starts = torch.randint(0, vocab_size, shape, generator=generator)
    strides = torch.randint(1, 4, shape, generator=generator)
    tokens = (starts + strides * torch.arange(seq_len)) % vocab_size
    for step in range(steps):
        yield tokens[step, rank]


def tiny_gpt2_config(seq_len):
    return GPT2Config(
        n_layer=2,
        n_head=2,
        n_embd=64,
        vocab_size=512,
        n_positions=seq_len,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )


def main():
    args = parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("nccl")
    rank, world_size = dist.get_rank(), dist.get_world_size()

    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    torch.manual_seed(args.seed)
    torch.cuda.manual_seed(args.seed)
    torch.backends.cudnn.benchmark = True

    config = tiny_gpt2_config(args.seq_len)
    model = GPT2LMHeadModel(config)
    # transformers picks a model's loss by its class name, and "GPT2LMHeadModel" names none: say which, or
    # every rank warns that loss_type=None is unrecognized before falling back to this same loss.
    model.loss_type = "ForCausalLM"
    model = model.cuda()
    model = DDP(model, device_ids=[device], output_device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scaler = torch.cuda.amp.GradScaler(enabled=args.fp16)

    def train_step(input_ids):
        optimizer.zero_grad(set_to_none=True)
        with torch.cuda.amp.autocast(enabled=args.fp16):
            loss = model(input_ids=input_ids, labels=input_ids).loss
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.detach()

    losses = []
    for step, input_ids in enumerate(
        synthetic_batches(
            args.steps, args.batch_size, args.seq_len, config.vocab_size, rank, world_size, args.seed
        )
    ):
        loss, seconds = timed(train_step, input_ids.to(device))
        dist.all_reduce(loss)
        loss = loss.item() / world_size
        losses.append(loss)
        if rank == 0:
            print(f"step {step + 1:3d}  loss {loss:.4f}  {seconds * 1000:.0f} ms")

    if rank == 0:
        peak = torch.cuda.max_memory_allocated(device)
        # 0 after training means no device allocator kept count (the cpu, once ported): say so, not "0.0 MiB".
        print(f"peak memory {peak / 2**20:.1f} MiB" if peak else "peak memory — (not tracked on this device)")
        if args.losses_out:
            with open(args.losses_out, "w") as out:
                json.dump(losses, out)
    # Drop the DDP model before its process group: alive past destroy_process_group, it can hang its
    # rank at exit (gloo, torch 2.13: about one run in three). And let every rank finish before the group
    # goes: gloo's worker may still be freeing the last all-reduce's tensors, which hung ranks at exit on
    # torch 2.6 and 2.7 (the worker waits for the GIL that destroying the group holds).
    model = optimizer = None
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
