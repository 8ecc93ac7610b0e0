"""The rules, in the order the engine runs them. Each is one concern; see its module docstring."""

from migrate.rules.api import TorchCudaApi

RULES = (TorchCudaApi,)
