"""The backend table. Probe order: vendor plugins first, since a vendor's CUDA compatibility layer can
make `torch.cuda.is_available()` answer True on its own hardware; then upstream xpu, cuda, mps; cpu last.
"""

from portlayer.backends import cpu, cuda, mlu, mps, musa, npu, xpu
from portlayer.backends.base import Backend, EnvAlias

PROBE_ORDER = (npu.BACKEND, musa.BACKEND, mlu.BACKEND, xpu.BACKEND, cuda.BACKEND, mps.BACKEND, cpu.BACKEND)
BY_NAME = {backend.name: backend for backend in PROBE_ORDER}

# torch's Backend.register_backend(devices="musa") maps each character of a string to the backend, so
# torch's own device -> collective map cannot be trusted; this one can.
DIST_BACKEND_BY_DEVICE = {backend.device_type: backend.dist_backend for backend in PROBE_ORDER}

__all__ = ["Backend", "EnvAlias", "PROBE_ORDER", "BY_NAME", "DIST_BACKEND_BY_DEVICE"]
