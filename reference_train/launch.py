"""`python -m portlayer.train.launch [TORCHRUN OPTIONS…] -- [TRAINER OPTIONS…]`: torchrun running the trainer, with
the ranks forked from one process that has imported torch's own modules once. `portlayer parity run` starts it.

Before its first step, each rank of the trainer imports torch, torch's compiler front-end (dynamo, which transformers
imports) and DTensor: about 5 s of CPU, paid once per rank under torchrun, which starts every rank as a new
interpreter. Here the ranks start as torchrun's own `--run-path` starts a script, with the forkserver start method:
the fork server imports PRELOADED once, and each rank is a fork of it.

A fork keeps what was imported and nothing that was initialised, as long as nothing was: importing PRELOADED asks
no device anything (no torch.cuda call, no vendor runtime), so each rank finds its device after the fork, as a new
interpreter would. Importing transformers does ask: torch.xpu and torch_npu, whether a device is there. So it is
preloaded only on a host where there is nothing to ask, a cpu-only torch with no device plugin installed. Where
importing torch has already loaded a vendor's plugin (torch's device-plugin autoload), whether that runtime
survives a fork is the vendor's business and unknown here, so the ranks start as torchrun starts them.
"""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path

PRELOADED = ("torch", "torch._dynamo", "torch.distributed.tensor", "torch.distributed.fsdp")
PRELOADED_WITHOUT_DEVICES = ("transformers.modeling_utils", "transformers.models.auto.modeling_auto")
TRAINER_SCRIPT = Path(__file__).with_name("__main__.py")


def autoloaded_plugins() -> list[str]:
    """The device plugins (of portlayer's backends, in-tree and registered) that `import torch` has loaded."""
    import torch  # noqa: F401  (the autoload happens here, if anywhere)

    from portlayer import backends

    return [backend.vendor_module for backend in backends.PROBE_ORDER if backend.vendor_module in sys.modules]


def device_runtimes() -> list[str]:
    """The device runtimes this host's torch has built in, and the device plugins installed beside it."""
    import torch

    from portlayer import backends
    from portlayer.selection import plugin_installed

    built_in = {"cuda": torch.backends.cuda.is_built(), "xpu": torch.xpu._is_compiled(), "mps": torch.backends.mps.is_built()}
    plugins = [backend.vendor_module for backend in backends.PROBE_ORDER if backend.vendor_module and plugin_installed(backend)]
    return [name for name, built in built_in.items() if built] + plugins


def preload() -> tuple[str, ...] | None:
    """The modules the fork server imports before it forks the ranks; None: no fork server, a device plugin is
    loaded already."""
    if autoloaded_plugins():
        return None
    return PRELOADED if device_runtimes() else PRELOADED + PRELOADED_WITHOUT_DEVICES


def torchrun_arguments(launcher: list[str], trainer: list[str]) -> list[str]:
    """torchrun's command line: the trainer's script run by ranks forked from the fork server (whose preload is
    set here), or the trainer's module run by new interpreters."""
    modules = preload()
    if modules is None:
        return [*launcher, "-m", "portlayer.train", *trainer]
    multiprocessing.set_forkserver_preload(list(modules))
    return [*launcher, "--run-path", "--start-method=forkserver", str(TRAINER_SCRIPT), *trainer]


def main(argv: list[str]) -> None:
    from torch.distributed import run as torchrun

    split = argv.index("--") if "--" in argv else len(argv)
    torchrun.main(torchrun_arguments(argv[:split], argv[split + 1 :]))


if __name__ == "__main__":
    main(sys.argv[1:])
