"""bitsandbytes optimizers rewritten into torch's.

Source: bitsandbytes-foundation/bitsandbytes@95f9af30 (bitsandbytes/optim/adamw.py, adam.py,
backends/cpu/ops.py#L367-L381, csrc/kernels.cu#L700-L710). Its Adam and AdamW share one update, with
*decoupled* weight decay (`p *= 1 - lr * weight_decay`) in both: each is `torch.optim.AdamW`, with the
weight_decay of Adam made explicit (0; AdamW's 1e-2 is torch's too). Its 32-bit and paged optimizers are
then exact (paging only moves the state between host and device memory). The 8-bit ones (`AdamW8bit`, `PagedAdamW8bit`, `Adam8bit`,
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


def _adam(weight_decay: str | None, eight_bit: bool):
    """`weight_decay`: the class's default where it is not torch AdamW's (1e-2), to be made explicit."""
    def convert(args: Arguments) -> Portable | Refused:
        unsupported = differs(args, amsgrad=False, args=None)
        if unsupported:
            return Refused(f"{unsupported} is not converted")
        bits = args.value("optim_bits", 32)
        if bits not in (8, 32):
            return Refused(f"optim_bits chosen at run time ({bits!r})")
        notes = (_MEMORY,) if eight_bit or bits == 8 else ()
        defaults = {} if weight_decay is None else {"weight_decay": weight_decay}
        return Portable("{torch}.optim.AdamW", args.keywords("lr", "betas", "eps", *() if defaults else ("weight_decay",),
                                                             **defaults),
                        "torch.optim.AdamW (the same update, decoupled weight decay"
                        + ("; moments in fp32)" if notes else ")"), notes)
    return convert


# Class name -> (its weight_decay default, 8-bit state), and the module that defines it.
_CLASSES = {
    f"{paged}{optimizer}{bits}": (weight_decay, bits == "8bit")
    for optimizer, weight_decay in (("AdamW", None), ("Adam", "0"))
    for paged in ("", "Paged") for bits in ("", "8bit", "32bit")
}
ROWS = {
    f"bitsandbytes.optim{module}.{name}": Row(_ADAM[:-1] if name.startswith("Paged") else _ADAM,
                                               _adam(*spec), "PL125", "PL219")
    for module in ("", ".adamw", ".adam")
    for name, spec in _CLASSES.items()
    if module in ("", "." + name.removeprefix("Paged").removesuffix("8bit").removesuffix("32bit").lower())
}


class BitsAndBytes(LibraryCalls):
    TRIGGER = Words(whole=("bitsandbytes",))
    ROWS = ROWS
    LIBRARIES = frozenset({"bitsandbytes"})
