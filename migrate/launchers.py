"""The `deepspeed` launcher in shell scripts (`deepspeed --include localhost:0,1 train.py`, `--num_gpus`,
`--num_nodes`, `--hostfile`), reported, never rewritten.

DeepSpeed's runner counts and selects devices through its accelerator (deepspeed/launcher/runner.py and
launch.py: `get_accelerator().device_count()`, and the `--include` indices become the accelerator's
`visible_devices_envs()`, ASCEND_RT_VISIBLE_DEVICES on npu). So on every device DeepSpeed has an
accelerator for, the command already launches on it (PL609, info). DeepSpeed has none for musa: there
the command is reported (PL610) with `torchrun` as the way to launch.
"""

from __future__ import annotations

import re

from portlayer.backends import BY_NAME
from portlayer.migrate.results import Diagnostic
from portlayer.strategies import deepspeed_devices as deepspeed_accelerators

# Options of the runner that name devices or nodes: what the report lists.
_DEVICE_OPTIONS = ("--include", "-i", "--exclude", "-e", "--num_gpus", "--num_accelerators", "--num_nodes",
                   "--hostfile", "-H")
_MENTION = re.compile(r"(?<![\w.-])deepspeed(?:\.launcher\.runner)?(?![\w-])")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_PREFIX_WORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time", "exec",
                           "nohup", "env", "sudo"})


def mentions_deepspeed(text: str) -> bool:
    return _MENTION.search(text) is not None


def launcher_diagnostics(text: str, commands: list[list[tuple[int, int]]], position, target: str) -> list[Diagnostic]:
    """One diagnostic per `deepspeed ...` command; `commands` are the lexer's words of each simple command
    and `position` turns an offset into (line, column)."""
    found = []
    for words in commands:
        texts = [text[a:b] for a, b in words]
        k = 0
        while k < len(texts) and (texts[k] in _PREFIX_WORDS or _ASSIGNMENT.match(texts[k])):
            k += 1
        if k == len(texts) or not _launches_deepspeed(texts[k:]):
            continue
        options = [word.split("=")[0] for word in texts[k + 1:] if word.split("=")[0] in _DEVICE_OPTIONS]
        named = f" ({', '.join(dict.fromkeys(options))})" if options else ""
        line, col = position(words[k][0])
        vendor = target if target in BY_NAME else None
        if deepspeed_accelerators.lacks(vendor):
            found.append(Diagnostic.of("PL610", line, col,
                                       f"the deepspeed launcher{named} finds no {vendor} accelerator in DeepSpeed"))
        else:
            found.append(Diagnostic.of("PL609", line, col, f"deepspeed launcher{named} left as is: it counts and "
                                                           "selects the accelerator DeepSpeed finds"))
    return found


def _launches_deepspeed(words: list[str]) -> bool:
    """`deepspeed …`, `/path/to/deepspeed …`, `python -m deepspeed.launcher.runner …`."""
    if words[0].rsplit("/", 1)[-1] == "deepspeed":
        return True
    return (re.fullmatch(r"(?:\S*/)?python[\d.]*", words[0]) is not None and len(words) > 2
            and words[1] == "-m" and words[2] in ("deepspeed", "deepspeed.launcher.runner"))
