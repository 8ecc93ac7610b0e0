"""CUDA and NCCL environment variables, carried over to the active backend's own names.

A launch script written for NVIDIA sets `CUDA_VISIBLE_DEVICES` and `NCCL_*`; on another backend portlayer
sets the backend's equivalents from them, before the vendor plugin initialises, unless the user already
set the backend's own variable (which always wins).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from typing import NamedTuple

from portlayer.backends.base import Backend, EnvAlias
from portlayer.errors import PortlayerError


class AppliedVariable(NamedTuple):
    target: str
    value: str
    source: str


def aliases(backend: Backend) -> tuple[EnvAlias, ...]:
    visible = ()
    if backend.visible_devices_env != "CUDA_VISIBLE_DEVICES":
        visible = (EnvAlias("CUDA_VISIBLE_DEVICES", backend.visible_devices_env),)
    return visible + backend.env_aliases


def translate(
    backend: Backend, environ: MutableMapping[str, str] = os.environ
) -> tuple[AppliedVariable, ...]:
    applied = []
    for alias in aliases(backend):
        if alias.target in environ or alias.source not in environ or not alias.carries(environ[alias.source]):
            continue
        value = environ[alias.source]
        if alias.convert is not None:
            try:
                value = alias.convert(value)
            except ValueError:
                raise PortlayerError(
                    f"{alias.source}={value!r} cannot be carried over to {alias.target}: not a number"
                ) from None
        environ[alias.target] = value
        applied.append(AppliedVariable(alias.target, value, alias.source))
    return tuple(applied)


def undo(applied: tuple[AppliedVariable, ...], environ: MutableMapping[str, str] = os.environ) -> None:
    for variable in applied:
        environ.pop(variable.target, None)
