"""The backend table: one record (`base.Backend`) per backend, the single source of backend facts for the
runtime, the drop-in, migrate and preflight. The records shipped here are `IN_TREE`; other distributions add
theirs through the `portlayer.backends` entry-point group (`out_of_tree`).

Probe order (`PROBE_ORDER`): out-of-tree backends first, in the order of their names (a plugin installed on
purpose, as vLLM lets an out-of-tree platform win over its built-in ones); then the in-tree vendor plugins
npu, musa, mlu, hpu, sdaa, supa, since a vendor's CUDA compatibility layer can make
`torch.cuda.is_available()` answer True on its own hardware; then upstream xpu, cuda, mps; cpu last. An
out-of-tree record with an in-tree name takes the in-tree one's place.

`PROBE_ORDER`, `BY_NAME` and `DIST_BACKEND_BY_DEVICE` include the out-of-tree records, so the first read of
one scans the installed distributions (once per process): `import portlayer` never does.
"""

from portlayer.backends import cpu, cuda, hpu, mlu, mps, musa, npu, sdaa, supa, xpu
from portlayer.backends.base import Backend, EnvAlias, VendorApi

IN_TREE = tuple(
    module.BACKEND for module in (npu, musa, mlu, hpu, sdaa, supa, xpu, cuda, mps, cpu)
)
_TABLES = ("PROBE_ORDER", "BY_NAME", "DIST_BACKEND_BY_DEVICE")

__all__ = ["Backend", "EnvAlias", "VendorApi", "IN_TREE", *_TABLES]


def probe_order(out_of_tree: tuple[Backend, ...]) -> tuple[Backend, ...]:
    """The in-tree records with `out_of_tree` ones added: new names first, known names in place."""
    shipped = {backend.name for backend in IN_TREE}
    replacing = {backend.name: backend for backend in out_of_tree}
    added = tuple(backend for backend in out_of_tree if backend.name not in shipped)
    return added + tuple(replacing.get(backend.name, backend) for backend in IN_TREE)


def __getattr__(name):
    if name not in _TABLES:
        raise AttributeError(f"module 'portlayer.backends' has no attribute {name!r}")
    from portlayer.backends import out_of_tree

    order = probe_order(out_of_tree.load())
    # torch's Backend.register_backend(devices="musa") maps each character of a string to the backend, so
    # torch's own device -> collective map cannot be trusted; this one can.
    globals().update(
        PROBE_ORDER=order,
        BY_NAME={backend.name: backend for backend in order},
        DIST_BACKEND_BY_DEVICE={backend.device_type: backend.dist_backend for backend in order},
    )
    return globals()[name]
