"""The words the rules fire on (case-insensitive), and the file-level test built from them.

Most files of a large tree mention none of them; telling so must cost next to nothing. CPython's
regex engine scans case-insensitive alternations slowly (seconds over a 50 MB tree), so the file
test lowers the text once and looks for each word as a substring first.

The file test reads fewer words than the statements are picked by: a rule's `file_words` are those that
make a file worth reading on their own (`cuda`, an import of apex). Words that only matter in a file with
CUDA code (an int index named `rank`, `.double()` on the neutral target) still pick statements there, but
never send a file through the rules: they are common in code that has nothing CUDA-specific (a quarter of
transformers' files say `rank`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Words:
    inside: tuple[str, ...] = ()  # also inside longer words: `cuda` in `is_cuda`
    whole: tuple[str, ...] = ()  # whole words only: `gpu`, not `gpus`
    # Top-level packages, which matter where a line imports them (`import apex`, `from nvidia import
    # dali`): to the file test only there; `nvidia/…` model names in strings and docstrings are not code.
    imported: tuple[str, ...] = ()

    def __or__(self, other: Words) -> Words:
        return Words(self.inside + other.inside, self.whole + other.whole, self.imported + other.imported)

    def pattern(self) -> re.Pattern:
        """Matches the words in a statement's code, case-insensitively (an imported package as a whole word)."""
        alternatives = [re.escape(word.lower()) for word in dict.fromkeys(self.inside)]
        whole = dict.fromkeys(word.lower() for word in self.whole + self.imported)
        if whole:
            alternatives.append(r"\b(?:" + "|".join(map(re.escape, whole)) + r")\b")
        return re.compile("|".join(alternatives) or "(?!)", re.IGNORECASE)


class Prefilter:
    """Does a file's text have any of `file_words`? False means no rule can fire anywhere in it.
    `trigger` picks the statements of a file that passed: by every rule's words, `statement_words`.

    Every word is first looked for as a substring of the lowered text (str.find: fast); only the few hits
    of a whole or imported word are then checked where they stand. One regex over the whole text, with
    an alternative for each word and one for an import line, cost three times the rest of the file test.
    """

    def __init__(self, file_words: Words, statement_words: Words):
        self.trigger = Trigger(statement_words)
        self._anywhere = _fewest({word.lower() for word in file_words.inside})
        # A word that contains one looked for anywhere is never looked for alone: the file passed already.
        standing = [(word.lower(), _whole_word) for word in file_words.whole]
        standing += [(word.lower(), _import_line(word.lower())) for word in file_words.imported]
        standing = [(word, test) for word, test in standing if not any(a in word for a in self._anywhere)]
        # Each of the fewest substrings, with the words that contain it and how each must stand.
        self._standing = {
            literal: [(word, test) for word, test in standing if literal in word]
            for literal in _fewest({word for word, _ in standing})
        }

    def matches(self, text: str) -> bool:
        lowered = text.lower()
        if any(word in lowered for word in self._anywhere):
            return True
        return any(
            test(lowered, at, word)
            for literal, words in self._standing.items() if literal in lowered
            for word, test in words for at in occurrences(lowered, word)
        )


class Trigger:
    """The statement test: does one of a statement's words have a rule's word (`search`, one word at a
    time), and where in a text may one stand (`offsets`: the lines the analysis reads closely)."""

    def __init__(self, words: Words):
        self.pattern = words.pattern()
        self._literals = _fewest({word.lower() for word in words.inside + words.whole + words.imported})

    def search(self, word: str) -> re.Match | None:
        return self.pattern.search(word)

    def offsets(self, text: str) -> list[int] | None:
        """Where in `text` a word may start: a superset (a whole word is looked for as a substring, and
        comments and docstrings count), found with str.find; the regex over a whole module costs as much
        as parsing it. None when lowering changes the text's length (an `İ`), which moves the offsets."""
        lowered = text.lower()
        if len(lowered) != len(text):
            return None
        return [at for literal in self._literals for at in occurrences(lowered, literal)]


def _fewest(words: set[str]) -> tuple[str, ...]:
    """`words` without those that contain another (`pycuda`, `cuda_` add nothing to `cuda`): each one
    left costs a scan of every file."""
    return tuple(sorted(word for word in words if not any(other != word and other in word for other in words)))


def occurrences(text: str, word: str):
    """Where `word` starts in `text`, overlaps included."""
    at = text.find(word)
    while at >= 0:
        yield at
        at = text.find(word, at + 1)


def _whole_word(text: str, at: int, word: str) -> bool:
    """Is `text[at:]`, which starts with `word`, the whole word there (as `\\b` sees it)?"""
    end = at + len(word)
    return not (at > 0 and _is_word_character(text[at - 1])) and not (end < len(text) and _is_word_character(text[end]))


def _is_word_character(character: str) -> bool:
    return character.isalnum() or character == "_"


def _import_line(package: str):
    """The test that `text[at:]`, which starts with `package` (lowered), is on a line that imports it:
    `from apex.x import y`, `import os, apex`."""
    name = re.escape(package)
    line = re.compile(rf"[ \t]*(?:from[ \t]+{name}\b|import[ \t][^\n#]*?\b{name}\b)")
    return lambda text, at, word: line.match(text, text.rfind("\n", 0, at) + 1) is not None
