"""Backends that other distributions add: each names its record under the `portlayer.backends` entry-point
group, the entry point's name being the backend's.

    # pyproject.toml of the distribution that ships the record
    [project.entry-points."portlayer.backends"]
    gcu = "portlayer_gcu:BACKEND"

Read once per process, when the backend table is first needed (see `portlayer.backends`). A record that cannot
be loaded is one clear error naming its entry point, not a backend that silently goes missing.
"""

from __future__ import annotations

from importlib import metadata

from portlayer.backends.base import Backend
from portlayer.errors import PortlayerError, first_line

GROUP = "portlayer.backends"


def _entry_points() -> list[metadata.EntryPoint]:
    return list(metadata.entry_points(group=GROUP))


def load() -> tuple[Backend, ...]:
    """Every installed out-of-tree record, in the order of their names."""
    by_name: dict[str, metadata.EntryPoint] = {}
    for entry in _entry_points():
        seen = by_name.setdefault(entry.name, entry)
        if seen.value != entry.value:  # the same distribution twice on sys.path is no conflict
            raise PortlayerError(f"two installed backends are named {entry.name!r}: {seen.value} and {entry.value}")
    return tuple(_record(by_name[name]) for name in sorted(by_name))


def _record(entry: metadata.EntryPoint) -> Backend:
    where = f"backend {entry.name!r} ({entry.value}, entry point group {GROUP})"
    try:
        record = entry.load()
    except Exception as exc:
        raise PortlayerError(f"{where} cannot be loaded: {first_line(exc)}") from None
    if not isinstance(record, Backend):
        raise PortlayerError(f"{where} is a {type(record).__name__}, not a portlayer.backends.Backend")
    if record.name != entry.name:
        raise PortlayerError(f"{where} names its record {record.name!r}: the two names must be the same")
    return record
