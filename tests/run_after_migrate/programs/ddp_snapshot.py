"""A torchrun DDP job in the shape of PyTorch's DDP tutorial series: the device is the int `LOCAL_RANK`
(`model.to(self.gpu_id)`, `device_ids=[self.gpu_id]`), the collective is `"nccl"`, the loader pins memory,
and a snapshot saved by rank 0 is resumed through `map_location=f"cuda:{gpu_id}"`.
Usage: `torchrun --nproc_per_node N ddp_snapshot.py TOTAL_EPOCHS SAVE_EVERY --snapshot_path PATH`.
"""

import argparse
import gc
import os

import torch
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class RegressionSet(Dataset):
    """y = x · w for a fixed w: a linear model fits it, so the loss falls epoch after epoch."""

    def __init__(self, size: int):
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(size, 20, generator=generator)
        self.y = self.x @ torch.linspace(-1, 1, 20).unsqueeze(1)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        return self.x[index], self.y[index]


def ddp_setup():
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    init_process_group(backend="nccl")


class Trainer:
    def __init__(self, model, train_data, optimizer, save_every: int, snapshot_path: str) -> None:
        self.gpu_id = int(os.environ["LOCAL_RANK"])
        self.model = model.to(self.gpu_id)
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epochs_run = 0
        self.snapshot_path = snapshot_path
        if os.path.exists(snapshot_path):
            self._load_snapshot(snapshot_path)
        self.model = DDP(self.model, device_ids=[self.gpu_id])

    def _load_snapshot(self, snapshot_path):
        loc = f"cuda:{self.gpu_id}"
        snapshot = torch.load(snapshot_path, map_location=loc)
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}", flush=True)

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        loss = F.mse_loss(self.model(source), targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch):
        self.train_data.sampler.set_epoch(epoch)
        losses = []
        for source, targets in self.train_data:
            source = source.to(self.gpu_id)
            targets = targets.to(self.gpu_id)
            losses.append(self._run_batch(source, targets))
        if self.gpu_id == 0:
            print(f"[GPU{self.gpu_id}] Epoch {epoch} | loss {sum(losses) / len(losses):.5f}", flush=True)
            print(f"model on {next(self.model.parameters()).device.type}", flush=True)

    def _save_snapshot(self, epoch):
        snapshot = {"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch + 1}
        torch.save(snapshot, self.snapshot_path)

    def train(self, max_epochs: int):
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.gpu_id == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def main(save_every: int, total_epochs: int, batch_size: int, snapshot_path: str):
    ddp_setup()
    torch.manual_seed(0)
    dataset = RegressionSet(256)
    model = torch.nn.Linear(20, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    train_data = DataLoader(
        dataset, batch_size=batch_size, pin_memory=True, shuffle=False, sampler=DistributedSampler(dataset)
    )
    trainer = Trainer(model, train_data, optimizer, save_every, snapshot_path)
    trainer.train(total_epochs)
    # Drop the DDP model before its process group: alive past destroy_process_group, its reducer can abort
    # the rank at exit on gloo ("terminate called without an active exception", under load).
    trainer = model = optimizer = None
    gc.collect()  # DDP's hooks hold the model in reference cycles: free its reducer now, not at exit
    destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("total_epochs", type=int, help="Total epochs to train the model")
    parser.add_argument("save_every", type=int, help="How often to save a snapshot")
    parser.add_argument("--batch_size", default=16, type=int, help="Input batch size on each device")
    parser.add_argument("--snapshot_path", default="snapshot.pt")
    args = parser.parse_args()
    main(args.save_every, args.total_epochs, args.batch_size, args.snapshot_path)
