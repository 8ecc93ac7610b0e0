"""What the CUDA example (examples/cuda_ddp_train.py) computes, by plain torch in one process.

Its loss under 2-rank DDP must match this on any backend: each step, the mean of the two ranks' losses (DDP
averages the ranks' gradients), one AdamW step. Shared by the drop-in and the stand-in-device tests.
"""

import importlib.util

import torch

from tests.processes import REPO

STEPS, WORLD_SIZE, BATCH_SIZE, SEQ_LEN, LR, SEED = 4, 2, 4, 32, 1e-3, 0


def reference_losses() -> list[float]:
    """Plain torch in one process, with the example's own model config and data."""
    example = _load_example()
    torch.manual_seed(SEED)
    model = example.GPT2LMHeadModel(example.tiny_gpt2_config(SEQ_LEN))
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    per_rank = [
        list(example.synthetic_batches(STEPS, BATCH_SIZE, SEQ_LEN, 512, rank, WORLD_SIZE, SEED))
        for rank in range(WORLD_SIZE)
    ]
    losses = []
    for step in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss = (
            sum(model(input_ids=batches[step], labels=batches[step]).loss for batches in per_rank)
            / WORLD_SIZE
        )
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def _load_example():
    spec = importlib.util.spec_from_file_location("cuda_ddp_train", REPO / "examples" / "cuda_ddp_train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
