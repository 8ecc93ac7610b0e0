class PortlayerError(RuntimeError):
    """A problem a user can fix, described in one line (an unknown backend, a missing plugin, …)."""


def first_line(exc: BaseException) -> str:
    """`Type: first line of the message`, for errors that come from code portlayer does not own."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
