"""portlayer: one small runtime API, named like `torch.cuda`, over every backend in `portlayer.backends`.

    import portlayer
    device = portlayer.device(local_rank)     # torch.device("npu", local_rank) on Ascend, …
    portlayer.synchronize()
    dist.init_process_group(portlayer.dist_backend())

Importing portlayer is cheap: torch and the vendor plugin load on first use of the API, when the backend
is selected (`PORTLAYER_BACKEND`, else the first backend in the probe order that sees a device).
"""

from portlayer.api import BOUND as _BOUND
from portlayer.errors import PortlayerError

# Submodules that mirror one of torch.cuda's (`torch.cuda.nvtx` -> `portlayer.nvtx`), imported on first use.
_SUBMODULES = ("nvtx",)

__version__ = "0.1.0"
__all__ = ["PortlayerError", "activate", "patch", "unpatch", "patched", *_BOUND, *_SUBMODULES]


def activate(name=None):
    """Select the backend (`name`, else `PORTLAYER_BACKEND`, else probing) and bind the API to it.

    Runs by itself on first use; call it to switch backends. Names imported earlier with
    `from portlayer import x` keep their old binding.
    """
    from portlayer import runtime

    return runtime.activate(name)


# The drop-in's process-wide patches, defined in `portlayer.dropin.patches` and imported only when called:
# the runtime itself never loads the drop-in.
def patch():
    """Apply the drop-in's process-wide patches for the active backend (nothing on cuda). Idempotent."""
    from portlayer.dropin import patches

    patches.patch()


def unpatch():
    """Put back every object `patch()` replaced, exactly. Idempotent."""
    from portlayer.dropin import patches

    patches.unpatch()


def patched():
    """`with portlayer.patched(): …` — the drop-in's patches inside the block, the state before restored after."""
    from portlayer.dropin import patches

    return patches.patched()


def __getattr__(name):
    # First use of any API name: select the backend and bind every name into this module's namespace,
    # so later lookups are plain attribute hits.
    if name in _BOUND:
        activate()
        return globals()[name]
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"portlayer.{name}")
    raise AttributeError(f"module 'portlayer' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_BOUND) | set(_SUBMODULES))
