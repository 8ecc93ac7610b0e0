"""A reusable trainer whose device is picked the way minGPT's `Trainer` and many copies of it pick it:
`device="auto"` in the config, resolved with `torch.cuda.is_available()`, every batch moved with
`.to(self.device)`, a loader that pins memory, and a "running on device" line.
Usage: `python auto_trainer.py [MAX_ITERS]`.
"""

import sys

import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset


class Config:
    device = "auto"
    num_workers = 0
    max_iters = 12
    batch_size = 16
    learning_rate = 5e-3


class SortDataset(Dataset):
    """Six digits in, the same digits sorted out (minGPT's demo problem, as a per-position classifier)."""

    def __init__(self, size: int):
        generator = torch.Generator().manual_seed(1)
        self.inputs = torch.randint(3, (size, 6), generator=generator)
        self.targets = self.inputs.sort(dim=1).values

    def __len__(self):
        return len(self.inputs)

    def __getitem__(self, index):
        return self.inputs[index], self.targets[index]


class Sorter(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(3, 16)
        self.mix = nn.Sequential(nn.Flatten(), nn.Linear(6 * 16, 64), nn.ReLU(), nn.Linear(64, 6 * 3))

    def forward(self, idx, targets=None):
        logits = self.mix(self.embed(idx)).view(-1, 6, 3)
        loss = None if targets is None else F.cross_entropy(logits.reshape(-1, 3), targets.reshape(-1))
        return logits, loss


class Trainer:
    def __init__(self, config, model, train_dataset):
        self.config = config
        self.model = model
        self.train_dataset = train_dataset
        # determine the device we'll train on
        if config.device == "auto":
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        else:
            self.device = config.device
        self.model = self.model.to(self.device)
        print("running on device", self.device, flush=True)
        print(f"model on {next(self.model.parameters()).device.type}", flush=True)

    def run(self):
        config = self.config
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.learning_rate)
        loader = DataLoader(
            self.train_dataset,
            shuffle=True,
            pin_memory=True,
            batch_size=config.batch_size,
            num_workers=config.num_workers,
            generator=torch.Generator().manual_seed(2),
        )
        self.model.train()
        data_iter = iter(loader)
        for iter_num in range(config.max_iters):
            try:
                batch = next(data_iter)
            except StopIteration:
                data_iter = iter(loader)
                batch = next(data_iter)
            batch = [t.to(self.device) for t in batch]
            x, y = batch
            _, loss = self.model(x, y)
            self.model.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            optimizer.step()
            print(f"iter {iter_num}: train loss {loss.item():.5f}", flush=True)


if __name__ == "__main__":
    torch.manual_seed(3)
    config = Config()
    if len(sys.argv) > 1:
        config.max_iters = int(sys.argv[1])
    Trainer(config, Sorter(), SortDataset(512)).run()
