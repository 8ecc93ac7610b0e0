"""TensorBoard event files (`events.out.tfevents.*`), read without TensorBoard: HuggingFace's `train/loss`,
`train/grad_norm`, `train/learning_rate`; Megatron-LM's `lm loss`, `grad-norm`, `learning-rate`.

A file is a sequence of TFRecords (little-endian: a uint64 length, the masked CRC-32C of those 8 bytes, the
data, the masked CRC-32C of the data); each record's data is one `Event` protocol buffer. The few fields a
scalar needs are read by number: Event 2 step, 5 summary; Summary 1 value; Value 1 tag, 2 simple_value (a
float32: torch's SummaryWriter, HuggingFace, Megatron), 8 tensor (TensorProto 1 dtype, 4 tensor_content, 5
float_val, 6 double_val: `new_style` and TF2 scalars). Everything else is skipped by its wire type.
A folder is read whole (a resumed run writes a new file): files in name order, a step's later value wins.
HuggingFace's `train/loss` is the mean since the previous log, Megatron's `lm loss` the iteration's own; a
Megatron tag's twin `… vs samples` counts samples, not steps, and is not read.
"""

from __future__ import annotations

import struct
from pathlib import Path

from portlayer.train.logs.numbers import EXACT, FLOAT32
from portlayer.train.logs.series import Collector, LogError, Series

NAME = "tensorboard"
LABEL = "TensorBoard events"

# Per quantity, the tags read, the first present in the file taken.
TAGS = {
    "loss": ("train/loss", "lm loss", "loss", "train_loss", "train_loss_step"),
    "grad_norm": ("train/grad_norm", "grad-norm", "grad_norm", "grad norm"),
    "lr": ("train/learning_rate", "learning-rate", "learning_rate", "lr"),
}
_INTERVAL_MEAN_TAGS = ("train/loss",)  # HuggingFace logs the mean loss since its previous log
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5
_DT_FLOAT, _DT_DOUBLE = 1, 2


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1  # CRC-32C (Castagnoli), reflected
        table.append(crc)
    return table


_CRC_TABLE = _crc_table()


def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC-32C of `data`, rotated and offset ("masked") as TensorFlow stores it."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def sniff(content) -> bool:
    if isinstance(content, list):
        return bool(content)
    return len(content) >= 12 and struct.unpack("<I", content[8:12])[0] == masked_crc32c(content[:8])


def records(data: bytes, path) -> tuple[list[tuple[bytes, int]], bool]:
    """([(record data, its stored checksum)], whether the file ends in a partial record: one cut while being
    written, whose complete records are kept)."""
    found, offset = [], 0
    while offset + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[offset : offset + 8])
        if struct.unpack("<I", data[offset + 8 : offset + 12])[0] != masked_crc32c(data[offset : offset + 8]):
            raise LogError(f"{path}: not a TensorBoard event file (bad record header at byte {offset})")
        end = offset + 12 + length
        if end + 4 > len(data):
            return found, True
        found.append((data[offset + 12 : end], struct.unpack("<I", data[end : end + 4])[0]))
        offset = end + 4
    return found, offset != len(data)


def _varint(buffer: bytes, position: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = buffer[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def fields(message: bytes):
    """(field number, value) of each field of a protocol buffer message: an int for a varint, bytes otherwise."""
    position = 0
    while position < len(message):
        key, position = _varint(message, position)
        wire = key & 7
        if wire == _VARINT:
            value, position = _varint(message, position)
        elif wire == _LENGTH:
            length, position = _varint(message, position)
            value, position = message[position : position + length], position + length
        elif wire in (_FIXED64, _FIXED32):
            size = 8 if wire == _FIXED64 else 4
            value, position = message[position : position + size], position + size
        else:
            raise ValueError(f"wire type {wire}")
        yield key >> 3, value


def _tensor_scalar(tensor: bytes) -> tuple[float, bool] | None:
    """(value, stored as float32) of a scalar TensorProto, or None for another dtype (text summaries)."""
    parts = dict(fields(tensor))
    dtype = parts.get(1)
    if dtype not in (_DT_FLOAT, _DT_DOUBLE):
        return None
    raw = parts.get(4) or parts.get(5 if dtype == _DT_FLOAT else 6)
    if not raw:
        return None
    return struct.unpack_from("<f" if dtype == _DT_FLOAT else "<d", raw)[0], dtype == _DT_FLOAT


def scalars(event: bytes):
    """(step, tag, value, stored as float32) for each scalar of one Event."""
    parts = list(fields(event))
    step = next((value for number, value in parts if number == 2), 0)
    step = step - (1 << 64) if step >= 1 << 63 else step
    for summary in (value for number, value in parts if number == 5):
        for number, entry in fields(summary):
            if number != 1:
                continue
            value = dict(fields(entry))
            if 2 in value:
                yield step, value.get(1, b"").decode("utf-8", "replace"), struct.unpack("<f", value[2])[0], True
            elif 8 in value and (scalar := _tensor_scalar(value[8])) is not None:
                yield step, value.get(1, b"").decode("utf-8", "replace"), *scalar


def read(path, content) -> Series:
    files = content if isinstance(content, list) else [Path(path)]
    if not files:
        raise LogError(f"{path}: no TensorBoard event file (events.out.tfevents.*) in this folder")
    events, found, notes = [], [], []
    for file in files:
        kept, cut = records(content if isinstance(content, bytes) else file.read_bytes(), file)
        if cut:
            notes.append(f"{file}: ends in a partial record (written while it was read?): read up to it")
        for record, checksum in kept:
            events.append((file, record, checksum))
            try:
                found += [(len(events) - 1, *scalar) for scalar in scalars(record)]
            except (ValueError, IndexError, struct.error):
                raise LogError(f"{file}: a record that is not a TensorBoard event") from None
    return _series(path, events, found, notes)


def _series(path, events: list, found: list, notes: list[str]) -> Series:
    """The scalars of the chosen tags, each record's data checksum verified (only those: a pure-Python CRC
    reads about 2 MB/s, and a Megatron file holds many tags)."""
    present = {tag for _, _, tag, _, _ in found}
    chosen = {quantity: next((tag for tag in tags if tag in present), None) for quantity, tags in TAGS.items()}
    wanted = {tag: quantity for quantity, tag in chosen.items() if tag is not None}
    collected, float32, verified = Collector(), set(), set()
    for index, step, tag, value, is_float32 in found:
        if tag not in wanted:
            continue
        file, record, checksum = events[index]
        if index not in verified and masked_crc32c(record) != checksum:
            raise LogError(f"{file}: the record of {tag!r} at step {step} fails its checksum (a damaged file)")
        verified.add(index)
        collected.add(step, **{wanted[tag]: value})
        if is_float32:
            float32.add(wanted[tag])
    resolutions = {quantity: FLOAT32 if quantity in float32 else EXACT for quantity in wanted.values()}
    interval = chosen["loss"] in _INTERVAL_MEAN_TAGS
    return collected.series(
        str(path), LABEL, notes=tuple(notes), loss_is_interval_mean=interval, resolutions=resolutions
    )
