"""accelerate config files (`accelerate launch --config_file F`, `accelerate config` writes them): YAML whose
top-level keys are accelerate's own, recognised by that content whatever the file is called.

What accelerate does with them (accelerate 1.15, commands/launch.py and state.py): `distributed_type`
only picks the launcher, and every MULTI_<device> value picks the same one; the process then finds its
device and collective itself. `gpu_ids` becomes the visible-devices variable of the accelerator found
(ASCEND_RT_VISIBLE_DEVICES, MUSA_VISIBLE_DEVICES, ...): left, said at info level (PL611). `MULTI_GPU`
launches on any accelerator, but on a host with none accelerate forms no process group (only
`MULTI_CPU` does, and that one never uses an accelerator): neutral and torch, whose programs may run on
the cpu, leave it and warn (PL612); a vendor target writes the vendor's `MULTI_NPU` / `MULTI_MUSA`, as
`accelerate config` does on that vendor's host (PL113). `mixed_precision: fp8` needs CUDA-only libraries
(PL613).

Only the value is rewritten, with a line-based edit: comments, quoting, order and line endings stay.
"""

from __future__ import annotations

import re

from portlayer.migrate.results import Change, Diagnostic, MigrationResult

SUFFIXES = (".yaml", ".yml")
# Top-level keys `accelerate config` writes; a file with `distributed_type` and one more is one.
_KEYS = re.compile(r"^(compute_environment|num_processes|mixed_precision|machine_rank|num_machines|gpu_ids|"
                   r"main_training_function|use_cpu|deepspeed_config|fsdp_config)\s*:", re.MULTILINE)
_DISTRIBUTED_TYPE = re.compile(r"^distributed_type\s*:[ \t]*(['\"]?)(MULTI_GPU)\1[ \t]*(?:#.*)?$", re.MULTILINE)
_GPU_IDS = re.compile(r"^gpu_ids\s*:", re.MULTILINE)
_FP8 = re.compile(r"^mixed_precision\s*:[ \t]*(['\"]?)fp8\1[ \t]*(?:#.*)?$", re.MULTILINE)


def is_accelerate_config(text: str) -> bool:
    return re.search(r"^distributed_type\s*:", text, re.MULTILINE) is not None and _KEYS.search(text) is not None


def names_cuda_devices(text: str) -> bool:
    """Something in an accelerate config that names CUDA's devices (only such files are read further)."""
    return is_accelerate_config(text) and any(
        pattern.search(text) for pattern in (_DISTRIBUTED_TYPE, _GPU_IDS, _FP8))


def migrate_config(text: str, vendor: str | None) -> MigrationResult:
    """Pure, like `migrate_source`: the file's text and the vendor target's device type (None for neutral
    and torch) in; the rewritten text and what was done out."""
    changes: list[Change] = []
    diagnostics: list[Diagnostic] = []
    pieces, last = [], 0
    for match in _DISTRIBUTED_TYPE.finditer(text):
        line = _line(text, match.start())
        if vendor is None:
            diagnostics.append(Diagnostic.of("PL612", line, 1, "distributed_type: MULTI_GPU left as is: on a host "
                                             "without an accelerator its processes train alone"))
            continue
        new = f"MULTI_{vendor.upper()}"
        changes.append(Change("PL113", line, match.start(2) - match.start() + 1, f"MULTI_GPU -> {new}"))
        pieces += [text[last : match.start(2)], new]
        last = match.end(2)
    code = "".join(pieces) + text[last:]
    for match in _GPU_IDS.finditer(text):
        diagnostics.append(Diagnostic.of("PL611", _line(text, match.start()), 1))
    for match in _FP8.finditer(text):
        diagnostics.append(Diagnostic.of("PL613", _line(text, match.start()), 1,
                                         "mixed_precision: fp8 needs Transformer Engine or MS-AMP"))
    diagnostics.sort(key=lambda d: (d.line, d.col))
    return MigrationResult(code=code, changes=tuple(changes), diagnostics=tuple(diagnostics), source=text)


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1
