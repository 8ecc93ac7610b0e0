"""What the public programs under public/ need to run here: their tiny-config arguments and the data they
would otherwise download, synthesised. The programs themselves stay as published."""

from __future__ import annotations

import random
from pathlib import Path

# Files of a public program's folder that are not part of the program: its provenance and license.
NOT_THE_PROGRAM = ("SOURCE.md", "LICENSE")

# pytorch/examples word_language_model: a one-layer LSTM of width 16 over 8-token windows, two epochs.
WORD_LANGUAGE_MODEL_TINY = (
    "--data", "data", "--epochs", "2", "--emsize", "16", "--nhid", "16", "--nlayers", "1",
    "--bptt", "8", "--batch_size", "4", "--dropout", "0", "--log-interval", "5",
)  # fmt: skip


def wikitext_like(folder: Path) -> None:
    """data/{train,valid,test}.txt in wikitext-2's layout (one line of space-separated words each): runs of
    8 consecutive words of a 12-word cycle, so that each next word is predictable and the loss falls
    within two small epochs."""
    rng = random.Random(0)
    words = [f"w{index}" for index in range(12)]
    (folder / "data").mkdir()
    for split, lines in (("train", 100), ("valid", 20), ("test", 20)):
        starts = [rng.randrange(len(words)) for _ in range(lines)]
        text = "".join(" ".join(words[(start + k) % len(words)] for k in range(8)) + "\n" for start in starts)
        (folder / "data" / f"{split}.txt").write_text(text)
