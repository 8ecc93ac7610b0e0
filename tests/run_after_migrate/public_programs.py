"""What the public programs under public/ need to run here: their tiny-config arguments and the data they
would otherwise download, synthesised. The programs themselves stay as published."""

from __future__ import annotations

import random
from pathlib import Path

# Files of a public program's folder that are not part of the program: its provenance and license.
NOT_THE_PROGRAM = ("SOURCE.txt", "LICENSE")

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


# HuggingFace accelerate's examples/nlp_example.py reads three things by hub name; each name is first looked
# up as a folder of the working directory, so a run folder holding these three runs it offline, unchanged.
GLUE_METRIC = '''"""GLUE MRPC's metric (accuracy and F1 of the positive class), for evaluate.load("glue", "mrpc")."""

import datasets
import evaluate


class Glue(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description="accuracy and F1",
            citation="",
            inputs_description="predictions and references: class ids",
            features=datasets.Features(
                {"predictions": datasets.Value("int64"), "references": datasets.Value("int64")}
            ),
        )

    def _compute(self, predictions, references):
        pairs = list(zip(predictions, references))
        hits = sum(1 for p, r in pairs if p == r == 1)
        wrong = sum(1 for p, r in pairs if p != r)
        return {"accuracy": 1 - wrong / len(pairs), "f1": 2 * hits / max(2 * hits + wrong, 1)}
'''

GLUE_CARD = """---
configs:
- config_name: mrpc
  data_files:
  - split: train
    path: mrpc/train.csv
  - split: validation
    path: mrpc/validation.csv
---
"""


def glue_mrpc_offline(folder: Path) -> None:
    """In `folder`: `bert-base-cased/` (a BERT of 2 layers of width 32 over a 40-word vocabulary, with its
    WordPiece tokenizer), `nyu-mll/glue/` (MRPC's columns: sentence1, sentence2, label, idx; 64 training
    and 32 validation pairs) and `glue/glue.py` (the metric)."""
    import csv

    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    rng = random.Random(0)
    words = [f"w{index}" for index in range(40)]
    model = folder / "bert-base-cased"
    model.mkdir()
    (model / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    BertTokenizerFast(vocab_file=str(model / "vocab.txt"), do_lower_case=False).save_pretrained(model)
    config = BertConfig(
        vocab_size=len(words) + 5,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    with torch.random.fork_rng():
        torch.manual_seed(0)
        BertForSequenceClassification(config).save_pretrained(model)

    mrpc = folder / "nyu-mll" / "glue" / "mrpc"
    mrpc.mkdir(parents=True)
    (mrpc.parent / "README.md").write_text(GLUE_CARD)
    for split, pairs in (("train", 64), ("validation", 32)):
        with open(mrpc / f"{split}.csv", "w", newline="") as table:
            writer = csv.writer(table)
            writer.writerow(["sentence1", "sentence2", "label", "idx"])
            for index in range(pairs):
                sentence = [rng.choice(words) for _ in range(6)]
                paraphrase = index % 2 == 1
                other = sentence[::-1] if paraphrase else [rng.choice(words) for _ in range(6)]
                writer.writerow([" ".join(sentence), " ".join(other), int(paraphrase), index])

    (folder / "glue").mkdir()
    (folder / "glue" / "glue.py").write_text(GLUE_METRIC)
