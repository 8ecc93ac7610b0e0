"""A GPT-style single-file training loop, written the way the most-copied ones are (nanoGPT's train.py shape).

Hard-wired to CUDA the way those scripts are: `device = "cuda"` and `backend = "nccl"` as module-level
settings, `f"cuda:{local_rank}"` under torchrun, a `device_type` string tested with `in` and `==`,
`pin_memory()` + `non_blocking` copies on the CUDA branch only, autocast off on the cpu, a GradScaler
enabled for float16, fused AdamW on CUDA only, and a checkpoint read back through `map_location`.
Usage: `python gpt_loop.py OUT_DIR`, or under `torchrun --nproc_per_node N`.
"""

import gc
import inspect
import os
import sys
from contextlib import nullcontext

import torch
import torch.nn as nn
from torch.distributed import destroy_process_group, init_process_group
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

out_dir = sys.argv[1] if len(sys.argv) > 1 else "out"
max_iters = 15
batch_size = 8
block_size = 16
vocab_size = 24
n_embd = 32
learning_rate = 1e-2
backend = "nccl"  # 'nccl', 'gloo', etc.
device = "cuda"  # 'cpu', 'cuda', 'cuda:0', ...
dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"

ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    init_process_group(backend=backend)
    ddp_rank = int(os.environ["RANK"])
    ddp_local_rank = int(os.environ["LOCAL_RANK"])
    device = f"cuda:{ddp_local_rank}"
    torch.cuda.set_device(device)
    master_process = ddp_rank == 0
    seed_offset = ddp_rank
else:
    master_process = True
    seed_offset = 0
torch.manual_seed(1337 + seed_offset)
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
device_type = "cuda" if "cuda" in device else "cpu"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=ptdtype)

# Token stream with an easy rule (next token = this one + 1), so a few steps visibly lower the loss.
data = torch.arange(4096) % vocab_size


def get_batch():
    ix = torch.randint(len(data) - block_size - 1, (batch_size,))
    x = torch.stack([data[i : i + block_size] for i in ix])
    y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix])
    if device_type == "cuda":
        # pin arrays x,y, which allows us to move them to GPU asynchronously (non_blocking=True)
        x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    else:
        x, y = x.to(device), y.to(device)
    return x, y


class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 2 * n_embd), nn.GELU(), nn.Linear(2 * n_embd, n_embd))
        self.ln = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        q, k, v = self.qkv(x).split(n_embd, dim=2)
        x = x + F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.mlp(self.ln(x))
        return self.lm_head(x)

    def configure_optimizers(self, lr, device_type):
        fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
        use_fused = fused_available and device_type == "cuda"
        extra_args = dict(fused=True) if use_fused else dict()
        return torch.optim.AdamW(self.parameters(), lr=lr, **extra_args)


model = TinyGPT()
model.to(device)
scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))
optimizer = model.configure_optimizers(learning_rate, device_type)
if ddp:
    model = DDP(model, device_ids=[ddp_local_rank])
raw_model = model.module if ddp else model

for it in range(max_iters):
    X, Y = get_batch()
    with ctx:
        logits = model(X)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), Y.view(-1))
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    if master_process:
        print(f"iter {it}: loss {loss.item():.4f}", flush=True)

if master_process:
    os.makedirs(out_dir, exist_ok=True)
    ckpt_path = os.path.join(out_dir, "ckpt.pt")
    torch.save({"model": raw_model.state_dict(), "iter_num": max_iters}, ckpt_path)
    checkpoint = torch.load(ckpt_path, map_location=device)
    raw_model.load_state_dict(checkpoint["model"])
    print(f"resumed checkpoint at iter {checkpoint['iter_num']}")
    print(f"model on {next(raw_model.parameters()).device.type}")
if ddp:
    # Drop the DDP model before its process group: alive past destroy_process_group, its reducer can abort
    # the rank at exit on gloo ("terminate called without an active exception", under load).
    model = raw_model = optimizer = None
    gc.collect()  # DDP's hooks hold the model in reference cycles: free its reducer now, not at exit
    destroy_process_group()
