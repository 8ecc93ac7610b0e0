"""Checkpoints that a killed run resumes from bitwise: model, optimizer, scheduler, scaler, RNG, position.

Layout: `DIR/step-000012/` holds `state.pt` (written by rank 0: the step records so far and what identifies the
run), `rng-rank<R>.pt` (each rank's own random states) and the strategy's model, optimizer and schedule state
as the strategy writes it (`portlayer.strategies`: one file from rank 0 under ddp and fsdp2, DeepSpeed's
own sharded folder under zero*). All ranks write
into `step-000012.partial/`; rank 0 renames it once every rank is done, so a run killed while saving
resumes from the previous complete checkpoint. The data position is the step number: the sample order
is a function of the seed alone (see `data.py`).
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import torch

import portlayer
from portlayer import PortlayerError

_PREFIX = "step-"
_PARTIAL = ".partial"


def _step_dir(root: Path, step: int) -> Path:
    return root / f"{_PREFIX}{step:06d}"


def latest(root: Path) -> Path | None:
    """The newest complete checkpoint under `root`, or None."""
    if not root.is_dir():
        return None
    complete = [p for p in root.iterdir() if p.name.startswith(_PREFIX) and not p.name.endswith(_PARTIAL)]
    return max(complete, key=lambda p: p.name, default=None)


def rng_state() -> dict:
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if portlayer.backend().is_accelerator:
        state["device"] = portlayer.get_rng_state()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "device" in state:
        portlayer.set_rng_state(state["device"])


def save(root: Path, step: int, rank: int, state: dict, barrier, save_strategy) -> None:
    """Write checkpoint `step` (`state` from rank 0, RNG from every rank, `save_strategy(folder, rank)` on
    every rank); `barrier()` syncs the ranks."""
    final = _step_dir(root, step)
    partial = final.with_name(final.name + _PARTIAL)
    if rank == 0:
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
    barrier()
    torch.save(rng_state(), partial / f"rng-rank{rank}.pt")
    save_strategy(partial, rank)
    if rank == 0:
        torch.save(state, partial / "state.pt")
    barrier()
    if rank == 0:
        partial.rename(final)
        for older in root.iterdir():
            if older.name.startswith(_PREFIX) and older != final:
                shutil.rmtree(older, ignore_errors=True)
    barrier()


def load(path: Path, rank: int) -> dict:
    """Rank `rank`'s view of checkpoint `path`: the shared state, and its own RNG states restored."""
    rng_file = path / f"rng-rank{rank}.pt"
    if not rng_file.exists():
        raise PortlayerError(
            f"{path}: no random state for rank {rank}; resume with the world size it was saved with"
        )
    # weights_only=False: the state holds Python RNG tuples and the run's step records, all written by us.
    set_rng_state(torch.load(rng_file, weights_only=False))
    return torch.load(path / "state.pt", map_location="cpu", weights_only=False)
