"""The backends preflight checks ops against: every one with a vendor plugin. Without torch, so that the
command's options (`portlayer --help`) and the kernel lists read the same tuple."""

from portlayer.backends import BY_NAME

PLUGIN_BACKENDS = tuple(name for name, backend in BY_NAME.items() if backend.is_plugin)
