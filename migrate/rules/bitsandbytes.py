"""bitsandbytes optimizers rewritten into torch's.

Source: bitsandbytes-foundation/bitsandbytes@95f9af30 (bitsandbytes/optim/adamw.py, adam.py). Its
32-bit and paged optimizers compute torch's AdamW / Adam update (paging only moves the state between
host and device memory): exact. The 8-bit ones (`AdamW8bit`, `PagedAdamW8bit`, `Adam8bit`,
`PagedAdam8bit`, or `optim_bits=8`) keep both moments block-wise quantised to one byte each; torch keeps
them in fp32, so the optimizer state grows about 4× (PL216).
"""

from __future__ import annotations

from portlayer.migrate.engine.triggers import Words
from portlayer.migrate.rules.library_calls import Arguments, LibraryCalls, Portable, Refused, Row, differs

_ADAM = ("params", "lr", "betas", "eps", "weight_decay", "amsgrad", "optim_bits", "args", "min_8bit_size",
         "is_paged")
_MEMORY = ("PL216", "its two moments were 8-bit (1 byte each per parameter, plus one fp32 scale per 256); "
                    "torch.optim keeps them in fp32: optimizer state grows from about 2 to 8 bytes per "
                    "parameter (4×, +6 bytes per parameter)")


def _adam(optimizer: str, eight_bit: bool):
    def convert(args: Arguments) -> Portable | Refused:
        unsupported = differs(args, amsgrad=False, args=None)
        if unsupported:
            return Refused(f"{unsupported} is not converted")
        bits = args.value("optim_bits", 32)
        if bits not in (8, 32):
            return Refused(f"optim_bits chosen at run time ({bits!r})")
        notes = (_MEMORY,) if eight_bit or bits == 8 else ()
        return Portable(f"{{torch}}.optim.{optimizer}", args.keywords("lr", "betas", "eps", "weight_decay"),
                        f"torch.optim.{optimizer} (same update"
                        + (", moments in fp32)" if notes else ")"), notes)
    return convert


# Their weight_decay defaults are torch's (AdamW 1e-2, Adam 0).
_CLASSES = {
    f"{paged}{optimizer}{bits}": (optimizer, bits == "8bit")
    for optimizer in ("AdamW", "Adam") for paged in ("", "Paged") for bits in ("", "8bit", "32bit")
}
ROWS = {
    f"bitsandbytes.optim{module}.{name}": Row(_ADAM[:-1] if name.startswith("Paged") else _ADAM,
                                               _adam(*spec), "PL125", "PL219")
    for module in ("", ".adamw", ".adam")
    for name, spec in _CLASSES.items()
    if module == "" or module[1:] == spec[0].lower()
}


class BitsAndBytes(LibraryCalls):
    TRIGGER = Words(whole=("bitsandbytes",))
    ROWS = ROWS
    LIBRARIES = frozenset({"bitsandbytes"})
