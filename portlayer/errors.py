class PortlayerError(RuntimeError):
    """A problem a user can fix, described in one line (an unknown backend, a missing plugin, …)."""
