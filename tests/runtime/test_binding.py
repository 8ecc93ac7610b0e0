"""What the README promises about binding: `import portlayer` is cheap, and after binding
`portlayer.synchronize` *is* `torch.npu.synchronize`; `with portlayer.device(i):` and mps's memory figures."""

import json

import pytest

from portlayer.api import MIRRORED
from tests.processes import run_python

HEAVY = ("torch", "torch_npu", "torch_musa", "transformers", "datasets", "libcst")


# What a new interpreter has imported: the warm one has torch already.
@pytest.mark.real_interpreter
def test_import_portlayer_loads_neither_torch_nor_a_plugin():
    result = run_python(
        "import json, sys, portlayer\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))"
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_using_the_runtime_never_loads_the_drop_in():
    # The dependency points one way: the drop-in uses the runtime, the runtime knows nothing of the drop-in.
    # `portlayer.patch` & co. are the runtime's names for the drop-in's patches, loaded only when called.
    result = run_python(
        "import json, sys, portlayer\n"
        "portlayer.synchronize(); portlayer.device(); portlayer.manual_seed(0); dir(portlayer)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('portlayer.dropin'))))",
        fake_plugins=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


BOUND_ON_NPU = """
import json, torch, portlayer
def _error(call):
    try:
        call()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
from portlayer import runtime
selected_first = runtime.selection().backend.name  # asking which backend selects it
portlayer.synchronize  # first use binds
with portlayer.device(1):
    default_inside = str(torch.empty(0).device)
print(json.dumps({
    "selected_first": selected_first,
    "identical": [name for name in portlayer.api.MIRRORED if getattr(portlayer, name) is getattr(torch.npu, name)],
    "synchronize_is": portlayer.synchronize is torch.npu.synchronize,
    "lazy_lookup_left": "__getattr__" in vars(portlayer),
    "same_device_object": portlayer.device(1) is portlayer.device(1),
    "default_inside": default_inside,
    "default_after": str(torch.empty(0).device),
    "ddp_ids": [portlayer.ddp_device_ids(torch.device("npu", 1)), portlayer.ddp_device_ids("npu:0"),
                portlayer.ddp_device_ids(1), portlayer.ddp_device_ids(torch.device("npu")),
                portlayer.ddp_device_ids(("npu:1", 0))],
    "devices": [str(portlayer.device()), str(portlayer.device("npu:1")), str(portlayer.device(torch.device("npu")))],
    "bad_index": _error(lambda: portlayer.ddp_device_ids(1.5)),
}))
"""


@pytest.fixture(scope="module")
def bound_on_npu():
    result = run_python(BOUND_ON_NPU, env={"PORTLAYER_BACKEND": "npu"})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_every_mirrored_name_is_the_vendors_own_function(bound_on_npu):
    assert bound_on_npu["selected_first"] == "npu"
    assert bound_on_npu["synchronize_is"] is True
    # Two deliberate exceptions: torch_npu's get_device_capability returns None (CANN has no such concept),
    # so portlayer answers (0, 0) there, as for any backend without the concept (backends/npu.py); set_device
    # names a rank's device index this process cannot see in one line first (rank_device.py), once per process.
    exceptions = ("get_device_capability", "set_device")
    assert bound_on_npu["identical"] == [name for name in MIRRORED if name not in exceptions]


def test_binding_removes_the_lazy_lookup(bound_on_npu):
    # CPython specialises attribute lookups only on modules without __getattr__.
    assert bound_on_npu["lazy_lookup_left"] is False


def test_ddp_device_ids_and_device_take_an_index_a_device_or_a_string(bound_on_npu):
    # the fake plugin's current device is 0 until set_device
    assert bound_on_npu["ddp_ids"] == [[1], [0], [1], [0], [1, 0]]
    assert bound_on_npu["devices"] == ["npu:0", "npu:1", "npu:0"]
    assert bound_on_npu["bad_index"] == (
        "TypeError: expected a device index, a torch.device or a device string, got 1.5"
    )


def test_with_portlayer_device_makes_it_the_default_for_new_tensors(bound_on_npu):
    assert bound_on_npu["default_inside"] == "npu:1"
    assert bound_on_npu["default_after"] == "cpu"
    assert bound_on_npu["same_device_object"] is True


# torch.mps on a host without Apple silicon: give it the figures an M-series Mac would report.
MPS_MEMORY = """
import json, torch
torch.backends.mps.is_available = lambda: True
torch.mps.current_allocated_memory = lambda: 3000
torch.mps.driver_allocated_memory = lambda: 5000
torch.mps.recommended_max_memory = lambda: int(__import__("os").environ["RECOMMENDED"])
import portlayer
portlayer.activate("mps")
print(json.dumps([portlayer.memory_allocated(), portlayer.max_memory_allocated(), portlayer.memory_reserved(),
                  portlayer.max_memory_reserved(), portlayer.mem_get_info(), portlayer.device_type()]))
"""


@pytest.mark.parametrize(
    ("recommended", "free"),
    [
        ("8000", 3000),  # free = recommended maximum - what the driver holds
        ("4000", 0),  # the driver holds more than recommended: nothing free, never negative
    ],
)
def test_mps_memory_reports_torch_mps_current_figures(recommended, free):
    result = run_python(MPS_MEMORY, fake_plugins=False, env={"RECOMMENDED": recommended})
    assert result.returncode == 0, result.stderr
    # torch.mps keeps no peaks: the peak figures report the current ones.
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [
        3000,
        3000,
        5000,
        5000,
        [free, int(recommended)],
        "mps",
    ]
