"""The rules, in the order the engine runs them. Each is one concern; see its module docstring.

Amp runs before TorchCudaApi (it rewrites the `torch.cuda.amp` calls whose arguments change) and
LegacyTensorTypes before both (the API rule leaves tensor types to it).
"""

from migrate.rules.amp import Amp
from migrate.rules.api import TorchCudaApi
from migrate.rules.cuda_only import CudaOnlyNames
from migrate.rules.devices import Devices
from migrate.rules.distributed import CollectiveBackend, DistributedDataParallelDevices
from migrate.rules.dtypes import Float64
from migrate.rules.environment import EnvironmentVariables
from migrate.rules.flags import BackendFlags
from migrate.rules.libraries import CudaExtensions, CudaOnlyLibraries
from migrate.rules.tensor_types import LegacyTensorTypes

RULES = (
    CudaOnlyLibraries,
    CudaExtensions,
    BackendFlags,
    CudaOnlyNames,
    Float64,
    LegacyTensorTypes,
    Amp,
    TorchCudaApi,
    Devices,
    CollectiveBackend,
    DistributedDataParallelDevices,
    EnvironmentVariables,
)
