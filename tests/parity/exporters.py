"""A portlayer run written out as each trainer would have logged it, for the readers' read-back tests: the
layout, number formatting and quirks are the tools' own (read from their source; tests/parity/data/logs/README.md
names the versions), so reading one back tests the reader on what that tool writes.

    export(run, "megatron", path, log_every=1)

Each writer logs every `log_every`-th step; where the tool logs the mean loss since its previous log
(HuggingFace, Megatron's text log), so does the writer.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

from portlayer.train.logs.tensorboard import masked_crc32c


def _logged(run: dict, log_every: int) -> list[tuple[dict, float]]:
    """(step record, mean loss since the previous logged step) for each logged step."""
    steps, logged, since = run["steps"], [], []
    for record in steps:
        since.append(record["loss"])
        if record["step"] % log_every == 0:
            logged.append((record, math.fsum(since) / len(since)))
            since = []
    return logged


def trainer_state(run: dict, path: Path, log_every: int = 1) -> None:
    """`Trainer.save_state()`: json.dumps(asdict(state), indent=2, sort_keys=True), log_history with a train
    entry per log (transformers 5: nothing rounded) and the final summary."""
    history = [
        {"epoch": record["step"] / len(run["steps"]), "grad_norm": record["grad_norm"], "learning_rate": record["lr"],
         "loss": mean, "step": record["step"]}
        for record, mean in _logged(run, log_every)
    ]  # fmt: skip
    losses = [record["loss"] for record in run["steps"]]
    history.append({"epoch": 1.0, "step": len(losses), "total_flos": 0.0, "train_loss": math.fsum(losses) / len(losses),
                    "train_runtime": 1.0, "train_samples_per_second": 1.0, "train_steps_per_second": 1.0})  # fmt: skip
    state = {"best_metric": None, "epoch": 1.0, "global_step": len(losses), "log_history": history,
             "logging_steps": log_every, "max_steps": len(losses), "num_train_epochs": 1, "save_steps": 500,
             "total_flos": 0.0, "train_batch_size": run["metadata"]["per_device_batch"]}  # fmt: skip
    path.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")


def ms_swift(run: dict, path: Path, log_every: int = 1) -> None:
    """ms-swift 3.x `logging.jsonl`: the HF log dict with every float rounded to 8 decimals, progress keys."""
    total = len(run["steps"])
    lines = [
        {"loss": round(mean, 8), "grad_norm": round(record["grad_norm"], 8), "learning_rate": round(record["lr"], 8),
         "token_acc": 0.5, "epoch": round(record["step"] / total, 8), "global_step/max_steps": f"{record['step']}/{total}",
         "percentage": f"{100 * record['step'] / total:.2f}%", "elapsed_time": "1s", "remaining_time": "1s",
         "memory(GiB)": 1.0, "train_speed(iter/s)": 1.0}
        for record, mean in _logged(run, log_every)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))


def megatron(run: dict, path: Path, log_every: int = 1) -> None:
    """Megatron-LM's `training_log` line (`print_rank_last`), log-interval `log_every`, after some start-up
    noise; the loss field left out where it is NaN, as Megatron does."""
    total = len(run["steps"])
    lines = ["> building GPT model ...", "[after dataloaders are built] datetime: 2025-11-14 10:05:41"]
    for record, mean in _logged(run, log_every):
        loss = "" if math.isnan(mean) else f" lm loss: {mean:.6E} |"
        lines.append(
            f" [2025-11-14 10:13:12] iteration {record['step']:8d}/{total:8d} | consumed samples: {record['step'] * 16:12d} |"
            f" elapsed time per iteration (ms): 450.5 | learning rate: {record['lr']:.6E} | global batch size: {16:5d} |"
            f"{loss} loss scale: 1.0 | grad norm: {record['grad_norm']:.3f} | number of skipped iterations: {0:3d} |"
            f" number of nan iterations: {int(math.isnan(mean)):3d} |"
        )
    path.write_text("\n".join(lines) + "\n")


def deepspeed(run: dict, path: Path, log_every: int = 1) -> None:
    """DeepSpeed's engine: `step=N` lines every `steps_per_print` steps, each with the lr of the step after it
    (printed after the schedule stepped), the `step=0` line at start-up; the pipeline engine's loss lines."""
    steps = run["steps"]
    lrs = [record["lr"] for record in steps] + [steps[-1]["lr"]]
    prefix = "[2025-01-02 15:46:55,967] [INFO] [logging.py:128:log_dist] [Rank 0] "
    lines = [f"{prefix}step=0, skipped=0, lr=[{lrs[0]!r}, {lrs[0]!r}], mom=[(0.9, 0.999), (0.9, 0.999)]"]
    for record in steps:
        lines.append(f"steps: {record['step']} loss: {record['loss']:0.4f} iter time (s): 0.186 samples/sec: 53.694")
        if record["step"] % log_every == 0:
            lr = lrs[record["step"]]
            lines.append(f"{prefix}step={record['step']}, skipped=0, lr=[{lr!r}, {lr!r}], mom=[(0.9, 0.999), (0.9, 0.999)]")
    path.write_text("\n".join(lines) + "\n")


def csv(run: dict, path: Path, log_every: int = 1) -> None:
    """A script's own `step,loss` CSV, as DeepSpeedExamples writes it: steps from 0, `str` of each value."""
    rows = ["step,loss,grad_norm,lr"] + [
        f"{record['step'] - 1},{record['loss']},{record['grad_norm']},{record['lr']}"
        for record in run["steps"] if record["step"] % log_every == 0
    ]  # fmt: skip
    path.write_text("\n".join(rows) + "\n")


def jsonl(run: dict, path: Path, log_every: int = 1) -> None:
    """One JSON object per logged step, as a script writes with json.dumps."""
    path.write_text("".join(
        json.dumps({"step": record["step"], "loss": record["loss"], "grad_norm": record["grad_norm"], "lr": record["lr"]}) + "\n"
        for record in run["steps"] if record["step"] % log_every == 0
    ))  # fmt: skip


def _record(data: bytes) -> bytes:
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data))


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _varint(len(payload)) + payload


def _scalar_event(step: int, tag: str, value: float) -> bytes:
    """An Event with one Summary.Value as torch's SummaryWriter.add_scalar writes it: a float32 simple_value."""
    summary_value = _length_delimited(1, tag.encode()) + _key(2, 5) + struct.pack("<f", value)
    return _key(1, 1) + struct.pack("<d", 1.7e9 + step) + _key(2, 0) + _varint(step) + _length_delimited(5, _length_delimited(1, summary_value))


def tensorboard(run: dict, path: Path, log_every: int = 1) -> None:
    """HuggingFace's TensorBoardCallback through SummaryWriter: the file-version record, then `train/loss` (the
    mean since the previous log), `train/grad_norm`, `train/learning_rate` at each logged step."""
    version = _key(1, 1) + struct.pack("<d", 1.7e9) + _length_delimited(3, b"brain.Event:2")
    events = [version]
    for record, mean in _logged(run, log_every):
        for tag, value in (("train/loss", mean), ("train/grad_norm", record["grad_norm"]), ("train/learning_rate", record["lr"])):
            events.append(_scalar_event(record["step"], tag, value))
    path.mkdir(parents=True, exist_ok=True)
    (path / "events.out.tfevents.1795740650.host.1.0").write_bytes(b"".join(map(_record, events)))


WRITERS = {
    "trainer_state": trainer_state,
    "ms-swift": ms_swift,
    "megatron": megatron,
    "deepspeed": deepspeed,
    "csv": csv,
    "jsonl": jsonl,
    "tensorboard": tensorboard,
}


def export(run: dict, format: str, path: Path, log_every: int = 1) -> Path:
    """Write `run` as `format` logs it at `path` (a folder for TensorBoard); returns what to read back."""
    WRITERS[format](run, path, log_every)
    return path
