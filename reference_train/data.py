"""Training data: local text, json or parquet files through `datasets`, cut into fixed-length token blocks.

The order is fixed by the seed alone: sample `p` of the run (counting across steps, accumulation
micro-steps and ranks) is block `permutation_e[p mod n]` of epoch `e = p // n`. The masked-LM masking of
a sample is keyed by its position too. So batches do not depend on timing, workers or restarts, a resumed
run sees exactly the samples the uninterrupted one would, and the same global batch split over 1 or 8
ranks covers the same samples.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import torch

from portlayer import PortlayerError
from portlayer.atomic import write_atomic
from portlayer.train import corpus, tokenizer

# File suffix -> the `datasets` builder that reads it.
BUILDERS = {".txt": "text", ".text": "text", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}
TEXT_COLUMN = "text"
MLM_PROBABILITY = 0.15
MAX_EVAL_BLOCKS = 64


def data_files(path: Path | None) -> tuple[str, list[str]]:
    """The `datasets` builder and the files for `--data PATH` (a file, or a folder of one format)."""
    if path is None:
        return "text", [str(corpus.corpus_path())]
    path = Path(path)
    if not path.exists():
        raise PortlayerError(f"--data {path}: no such file or folder")
    files = sorted(p for p in path.rglob("*") if p.suffix in BUILDERS) if path.is_dir() else [path]
    if not files:
        raise PortlayerError(f"--data {path}: no {', '.join(BUILDERS)} files")
    builders = {BUILDERS.get(p.suffix) for p in files}
    if None in builders:
        raise PortlayerError(f"--data {path}: unsupported file type; use one of {', '.join(BUILDERS)}")
    if len(builders) > 1:
        raise PortlayerError(f"--data {path}: mixes {' and '.join(sorted(builders))} files; use one format")
    return builders.pop(), [str(p) for p in files]


def load_texts(path: Path | None) -> list[str]:
    import datasets

    builder, files = data_files(path)
    datasets.disable_progress_bars()
    dataset = datasets.load_dataset(
        builder, data_files=files, split="train", cache_dir=str(corpus.cache_dir() / "datasets")
    )
    if TEXT_COLUMN not in dataset.column_names:
        raise PortlayerError(
            f"--data {path}: no '{TEXT_COLUMN}' column (columns: {', '.join(dataset.column_names)})"
        )
    return [text for text in dataset[TEXT_COLUMN] if text]


@dataclass(frozen=True)
class Blocks:
    """Token blocks of `seq_len` ids: `train` [n, seq_len] and a held-out `eval` [m, seq_len]."""

    train: torch.Tensor
    eval: torch.Tensor
    tokenizer: object
    task: str


def tokenizer_for(task: str):
    """The task's tokenizer, trained on the built-in corpus, also for `--data`: one vocabulary per task."""
    return tokenizer.load_tokenizer(task, corpus.corpus_path())


def token_stream(task: str, path: Path | None):
    """All documents' token ids, concatenated (causal LMs: with end-of-text after each), cached on disk.

    The cache key covers the task, the tokenizer and the files' contents, so editing the data retokenizes.
    """
    tok = tokenizer_for(task)
    builder, files = data_files(path)
    key = hashlib.sha256(f"{task}\n{builder}\n".encode())
    key.update(tok.backend_tokenizer.to_str().encode())
    for name in files:
        key.update(corpus.sha256_file(Path(name)).encode())
    cached = corpus.cache_dir() / "tokens" / f"{key.hexdigest()[:32]}.pt"
    if cached.exists():
        return torch.load(cached)
    ids = tok(load_texts(path), add_special_tokens=False)["input_ids"]
    suffix = (tok.eos_token_id,) if task == "causal-lm" else ()  # documents joined by end-of-text, as GPT-2's
    stream = torch.tensor([token for doc in ids for token in (*doc, *suffix)], dtype=torch.int32)
    buffer = io.BytesIO()
    torch.save(stream, buffer)
    write_atomic(cached, buffer.getvalue())
    return stream


def load_blocks(task: str, seq_len: int, path: Path | None = None) -> Blocks:
    """The data cut into blocks of `seq_len` tokens (masked LM: [CLS] … [SEP]); the last few held out."""
    tok = tokenizer_for(task)
    stream = token_stream(task, path).long()
    width = seq_len if task == "causal-lm" else seq_len - 2
    n = len(stream) // width
    if n < 2:
        raise PortlayerError(f"the data holds {len(stream)} tokens: too few for two blocks of {seq_len}")
    blocks = stream[: n * width].view(n, width)
    if task == "masked-lm":
        blocks = torch.cat(
            [
                torch.full((n, 1), tok.cls_token_id, dtype=torch.long),
                blocks,
                torch.full((n, 1), tok.sep_token_id, dtype=torch.long),
            ],
            dim=1,
        )
    n_eval = max(1, min(MAX_EVAL_BLOCKS, n // 20))
    return Blocks(train=blocks[: n - n_eval], eval=blocks[n - n_eval :], tokenizer=tok, task=task)


class Order:
    """The fixed sample order: a fresh seeded permutation of the training blocks per epoch."""

    def __init__(self, n: int, seed: int):
        self.n, self.seed = n, seed
        self._epochs: dict[int, torch.Tensor] = {}

    def _permutation(self, epoch: int) -> torch.Tensor:
        if epoch not in self._epochs:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._epochs[epoch] = torch.randperm(self.n, generator=generator)
        return self._epochs[epoch]

    def blocks_at(self, positions: torch.Tensor) -> torch.Tensor:
        return torch.stack([self._permutation(int(p) // self.n)[int(p) % self.n] for p in positions])


def make_batch(
    blocks: Blocks, input_ids: torch.Tensor, sample_keys: torch.Tensor, seed: int
) -> dict[str, torch.Tensor]:
    """Model inputs with labels for the blocks `input_ids`; `sample_keys` key the masked-LM masking."""
    if blocks.task == "causal-lm":
        return {
            "input_ids": input_ids,
            "attention_mask": torch.ones_like(input_ids),
            "labels": input_ids.clone(),
        }
    return mask_tokens(blocks.tokenizer, input_ids, [seed * 1_000_003 + int(key) for key in sample_keys])


def mask_tokens(tok, input_ids: torch.Tensor, sample_seeds: list[int]) -> dict[str, torch.Tensor]:
    """BERT masking by transformers' MLM collator, each sample drawn from its own seeded generator."""
    from transformers import DataCollatorForLanguageModeling

    collator = DataCollatorForLanguageModeling(tok, mlm_probability=MLM_PROBABILITY)
    masked, labels = [], []
    for row, sample_seed in zip(input_ids, sample_seeds):
        collator.generator = torch.Generator().manual_seed(sample_seed)
        ids, lab = collator.torch_mask_tokens(row[None].clone())
        masked.append(ids[0])
        labels.append(lab[0])
    input_ids = torch.stack(masked)
    return {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "labels": torch.stack(labels),
    }


def train_batch(
    blocks: Blocks, order: Order, first_position: int, size: int, seed: int
) -> dict[str, torch.Tensor]:
    """The `size` training samples from run position `first_position` on."""
    positions = torch.arange(first_position, first_position + size)
    return make_batch(blocks, blocks.train[order.blocks_at(positions)], positions, seed)


def eval_batch(blocks: Blocks, first: int, size: int, seed: int) -> dict[str, torch.Tensor]:
    """Held-out blocks `first` … `first + size - 1` (masking keyed apart from every training position)."""
    rows = torch.arange(first, min(first + size, len(blocks.eval)))
    return make_batch(blocks, blocks.eval[rows], -1 - rows, seed)
