"""The rules, in the order the engine runs them. Each is one concern; see its module docstring.

The file rules (`FileRule`: what the file's facts alone answer) run first; none reads what another did.

The library rows (Apex, BitsAndBytes, Liger, Attention) run before CudaOnlyLibraries, which does not report an
import whose every use they converted; Attention also before BackendFlags, which would otherwise report the
`torch.backends.cuda.sdp_kernel` it rewrites. Amp runs before TorchCudaApi (it rewrites the `torch.cuda.amp`
calls whose arguments change) and LegacyTensorTypes before both (the API rule leaves tensor types to it);
TensorTypeChecks before LegacyTensorTypes (which reports the type strings it leaves).
DeepSpeedCalls runs before CollectiveBackend (it drops DeepSpeed's "nccl" rather than renaming it) and
FsdpDeviceId and CurrentDeviceGiven before TorchCudaApi (they replace `torch.cuda.current_device()` given as
FSDP's or any device whole).
"""

from portlayer.migrate.rules.amp import Amp
from portlayer.migrate.rules.apex import Apex
from portlayer.migrate.rules.api import TorchCudaApi
from portlayer.migrate.rules.attention import Attention
from portlayer.migrate.rules.bitsandbytes import BitsAndBytes
from portlayer.migrate.rules.cuda_only import CudaOnlyNames
from portlayer.migrate.rules.current_device import CurrentDeviceGiven
from portlayer.migrate.rules.devices import Devices
from portlayer.migrate.rules.dispatching import AlreadyDispatching
from portlayer.migrate.rules.distributed import CollectiveBackend, DistributedDataParallelDevices
from portlayer.migrate.rules.dtypes import Float64
from portlayer.migrate.rules.environment import EnvironmentVariables
from portlayer.migrate.rules.flags import BackendFlags
from portlayer.migrate.rules.int_devices import IntDeviceAssignments, IntDeviceIndices
from portlayer.migrate.rules.libraries import CudaExtensions, CudaOnlyLibraries, ProgramFallbacks
from portlayer.migrate.rules.liger import Liger
from portlayer.migrate.rules.nvidia_smi import NvidiaSmi
from portlayer.migrate.rules.scaleout import DeepSpeedCalls, FsdpDeviceId
from portlayer.migrate.rules.shadowed_imports import ShadowedCudaImports
from portlayer.migrate.rules.tensor_type_checks import TensorTypeChecks
from portlayer.migrate.rules.tensor_types import LegacyTensorTypes

RULES = (
    ProgramFallbacks,
    AlreadyDispatching,
    ShadowedCudaImports,
    IntDeviceAssignments,
    Apex,
    BitsAndBytes,
    Liger,
    Attention,
    CudaOnlyLibraries,
    CudaExtensions,
    BackendFlags,
    CudaOnlyNames,
    Float64,
    TensorTypeChecks,
    LegacyTensorTypes,
    DeepSpeedCalls,
    FsdpDeviceId,
    CurrentDeviceGiven,
    Amp,
    TorchCudaApi,
    Devices,
    IntDeviceIndices,
    CollectiveBackend,
    DistributedDataParallelDevices,
    EnvironmentVariables,
    NvidiaSmi,
)
