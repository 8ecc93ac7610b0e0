"""The words the rules fire on (case-insensitive), and the file-level test built from them.

Most files of a large tree mention none of them; telling so must cost next to nothing. CPython's
regex engine scans case-insensitive alternations slowly (seconds over a 50 MB tree), so the file
test lowers the text once and looks for each word as a substring first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Words:
    inside: tuple[str, ...] = ()  # also inside longer words: `cuda` in `is_cuda`
    whole: tuple[str, ...] = ()  # whole words only: `apex`, not `apexes`

    def __or__(self, other: Words) -> Words:
        return Words(self.inside + other.inside, self.whole + other.whole)

    def pattern(self, flags: int = re.IGNORECASE) -> re.Pattern:
        alternatives = [re.escape(word.lower()) for word in dict.fromkeys(self.inside)]
        if self.whole:
            alternatives.append(r"\b(?:" + "|".join(re.escape(w.lower()) for w in dict.fromkeys(self.whole)) + r")\b")
        return re.compile("|".join(alternatives) or "(?!)", flags)


class Prefilter:
    """Does a file's text have any of `words`? False means no rule can fire anywhere in it."""

    def __init__(self, words: Words):
        self.trigger = words.pattern()  # for the code's words, one at a time
        self._literals = sorted({word.lower() for word in words.inside + words.whole})
        self._in_lowered = words.pattern(flags=0)

    def matches(self, text: str) -> bool:
        lowered = text.lower()
        return any(word in lowered for word in self._literals) and self._in_lowered.search(lowered) is not None
