"""The built-in training corpus: English-like text generated from a fixed seed, byte-identical everywhere.

Nothing is downloaded. The text has a Zipf-shaped vocabulary and a little grammar, so a model has
something to learn (the loss falls well below log(vocab)) while a 2-layer model on a cpu still trains in
seconds. Users train on their own data with `--data FILE_OR_DIR` instead (see `data.py`).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random
from pathlib import Path

from portlayer.atomic import write_atomic

CORPUS_VERSION = 1
DEFAULT_LINES = 20_000

_ONSETS = (
    "b",
    "c",
    "d",
    "f",
    "g",
    "h",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "w",
    "st",
    "tr",
    "pl",
    "gr",
)
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ou")
_CODAS = ("", "", "n", "r", "s", "t", "l", "nd", "st")


def cache_dir() -> Path:
    """Where the corpus and the trained tokenizers are cached: `$PORTLAYER_CACHE`, else ~/.cache/portlayer."""
    override = os.environ.get("PORTLAYER_CACHE")
    return Path(override) if override else Path.home() / ".cache" / "portlayer"


def _lexicon(rng: random.Random, size: int) -> list[str]:
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < size:
        syllables = rng.choice((1, 1, 2, 2, 2, 3))
        word = "".join(
            rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables)
        )
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def generate(lines: int = DEFAULT_LINES, seed: int = 0) -> str:
    """The corpus text. Python's `random.Random` sequence for a seed is stable across versions and hosts."""
    rng = random.Random(f"portlayer-corpus-{CORPUS_VERSION}-{seed}")
    nouns, verbs, adjectives = _lexicon(rng, 1200), _lexicon(rng, 400), _lexicon(rng, 300)

    # Zipf weights (a few words common, most rare, as in natural text), cumulated once for `choices`.
    def zipf(words):
        return list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(words))))

    noun_w, verb_w, adj_w = zipf(nouns), zipf(verbs), zipf(adjectives)
    determiners = ("the", "a", "every", "some", "this", "that", "no")
    joins = ("and", "but", "while", "because", "so")

    def clause() -> str:
        subject = [rng.choice(determiners)]
        if rng.random() < 0.4:
            subject += rng.choices(adjectives, cum_weights=adj_w)
        subject += rng.choices(nouns, cum_weights=noun_w)
        words = (
            subject
            + rng.choices(verbs, cum_weights=verb_w)
            + [rng.choice(determiners)]
            + rng.choices(nouns, cum_weights=noun_w)
        )
        return " ".join(words)

    out = []
    for _ in range(lines):
        sentence = clause()
        while rng.random() < 0.3:
            sentence += f" {rng.choice(joins)} {clause()}"
        out.append(sentence[0].upper() + sentence[1:] + ".")
    return "\n".join(out) + "\n"


def corpus_path(lines: int = DEFAULT_LINES) -> Path:
    """The generated corpus as a text file in the cache (written on first use)."""
    path = cache_dir() / f"corpus-v{CORPUS_VERSION}-{lines}.txt"
    if not path.exists():
        write_atomic(path, generate(lines))
    return path


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        for chunk in iter(lambda: source.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
