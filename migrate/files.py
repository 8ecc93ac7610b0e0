"""Reading a source file into text and writing text back to exactly the bytes conventions it came with.

Python files are decoded the way the interpreter decodes them (PEP 263 cookie, UTF-8 BOM); shell scripts
(and accelerate's YAML configs, read the same way) have no declared encoding, so they are read as UTF-8 with undecodable bytes carried through unchanged.
Line endings are never translated: the text keeps its `\\r\\n`, and so does what is written back.
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass

from portlayer.migrate.results import SourceError


class DecodeError(SourceError):
    """The bytes are not text in the encoding the file declares (reported as PL902, not PL901)."""


@dataclass(frozen=True)
class SourceText:
    text: str
    encoding: str
    errors: str = "strict"

    def encode(self, text: str) -> bytes:
        return text.encode(self.encoding, self.errors)


def decode_python(data: bytes) -> SourceText:
    try:
        # "utf-8-sig" when there is a BOM: decoding drops it and encoding puts it back.
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # an unknown or contradictory coding cookie
        line = exc.lineno or 1
        raise DecodeError(line, 1, str(exc.msg)) from None
    try:
        return SourceText(data.decode(encoding), encoding)
    except UnicodeDecodeError as exc:
        line, col = _position(data, exc.start)
        raise DecodeError(
            line, col, f"byte 0x{data[exc.start]:02x} is not valid {encoding}: {exc.reason}"
        ) from None


def decode_shell(data: bytes) -> SourceText:
    return SourceText(data.decode("utf-8", "surrogateescape"), "utf-8", "surrogateescape")


def _position(data: bytes, offset: int) -> tuple[int, int]:
    line_start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - line_start + 1  # both 1-based
