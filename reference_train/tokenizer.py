"""Tokenizers trained locally with `tokenizers` on the corpus, cached by content, identical on every host.

One per task: a byte-level BPE like GPT-2's for causal LMs (gpt2, mixtral) and a lower-casing one with
BERT's special tokens for the masked LM. The cache key is the corpus's sha256, the task and the vocabulary
size, so a changed corpus never reuses a stale tokenizer.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from portlayer.atomic import write_atomic
from portlayer.train.corpus import cache_dir, sha256_file

VOCAB_SIZE = 2048

# The special tokens of each task's tokenizer, as `PreTrainedTokenizerFast` keyword arguments.
SPECIAL_TOKENS = {
    "causal-lm": {"eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"},
    "masked-lm": {
        "pad_token": "[PAD]",
        "unk_token": "[UNK]",
        "cls_token": "[CLS]",
        "sep_token": "[SEP]",
        "mask_token": "[MASK]",
    },
}


def _train(task: str, vocab_size: int, corpus_file: Path):
    """Byte-level BPE for both tasks (lower-cased, with BERT's special tokens, for the masked LM).

    Not WordPiece: its trainer breaks ties between equally frequent merges in hash order, so two runs
    give different vocabularies. Byte-level BPE seeded with the full byte alphabet is reproducible.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    if task == "masked-lm":
        tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(dict.fromkeys(SPECIAL_TOKENS[task].values())),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train([str(corpus_file)], trainer)
    return tokenizer


@cache
def load_tokenizer(task: str, corpus_file: Path, vocab_size: int = VOCAB_SIZE):
    """The `PreTrainedTokenizerFast` for `task`, trained on `corpus_file` on first use and cached on disk."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    path = cache_dir() / "tokenizers" / f"{task}-{vocab_size}-{sha256_file(corpus_file)[:16]}.json"
    if path.exists():
        tokenizer = Tokenizer.from_file(str(path))
    else:
        tokenizer = _train(task, vocab_size, corpus_file)
        write_atomic(path, tokenizer.to_str())
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, **SPECIAL_TOKENS[task])
