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

    def pattern(self, flags: int = re.IGNORECASE) -> re.Pattern:
        """Matches the words in a statement's code (an imported package as a whole word)."""
        return self._compile(self._alternatives(self.whole + self.imported), flags)

    def file_pattern(self, flags: int = re.IGNORECASE) -> re.Pattern:
        """Matches the words in a whole file (an imported package only on a line that imports it)."""
        alternatives = self._alternatives(self.whole)
        if self.imported:
            names = _one_of(self.imported)
            alternatives.append(rf"^[ \t]*(?:from[ \t]+{names}\b|import[ \t][^\n#]*?\b{names}\b)")
        return self._compile(alternatives, flags | re.MULTILINE)

    def _alternatives(self, whole: tuple[str, ...]) -> list[str]:
        alternatives = [re.escape(word.lower()) for word in dict.fromkeys(self.inside)]
        if whole:
            alternatives.append(rf"\b{_one_of(whole)}\b")
        return alternatives

    @staticmethod
    def _compile(alternatives: list[str], flags: int) -> re.Pattern:
        return re.compile("|".join(alternatives) or "(?!)", flags)

    def literals(self) -> list[str]:
        """The fewest lowered substrings one of which a matching text has: a word that contains another
        (`pycuda`, `cuda_`) adds nothing to `cuda`, and each one left costs a scan of every file."""
        words = {word.lower() for word in self.inside + self.whole + self.imported}
        return sorted(word for word in words if not any(other != word and other in word for other in words))


def _one_of(words: tuple[str, ...]) -> str:
    return "(?:" + "|".join(re.escape(word.lower()) for word in dict.fromkeys(words)) + ")"


class Prefilter:
    """Does a file's text have any of `file_words`? False means no rule can fire anywhere in it.
    `trigger` picks the statements of a file that passed: by every rule's words, `statement_words`."""

    def __init__(self, file_words: Words, statement_words: Words):
        self.trigger = statement_words.pattern()  # for the code's words, one at a time
        self._literals = file_words.literals()
        self._in_lowered = file_words.file_pattern(flags=0)

    def matches(self, text: str) -> bool:
        lowered = text.lower()
        return any(word in lowered for word in self._literals) and self._in_lowered.search(lowered) is not None
