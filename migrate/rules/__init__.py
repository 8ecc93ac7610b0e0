"""The rules, in the order the engine runs them. Each is one concern; see its module docstring."""

from migrate.rules.amp import Amp
from migrate.rules.api import TorchCudaApi
from migrate.rules.devices import Devices
from migrate.rules.distributed import CollectiveBackend, DistributedDataParallelDevices

RULES = (Amp, TorchCudaApi, Devices, CollectiveBackend, DistributedDataParallelDevices)
