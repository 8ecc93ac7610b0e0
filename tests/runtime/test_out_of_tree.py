"""Backends from other distributions (`portlayer.backends` entry points), and new in-tree records, selected
through fake plugins that register with torch as the real ones do."""

import json
import os
import textwrap

import pytest

from portlayer.backends import IN_TREE, Backend, VendorApi, out_of_tree, probe_order
from portlayer.errors import PortlayerError
from tests.fake_backend import fake_plugin, install_gcu, package
from tests.processes import REPO, run_python

# Gaudi's device type is torch's own `hpu` (its own dispatch key), which the PrivateUse1 stand-in cannot take
# over: this plugin only registers a device module with two devices and the collective, as
# habana_frameworks.torch does, which is what selection needs.
GAUDI_PLUGIN = """
import types, torch, torch.distributed as dist
hpu = types.ModuleType(__name__ + ".hpu")
hpu.device_count, hpu.is_available, hpu.current_device = (lambda: 2), (lambda: True), (lambda: 0)
hpu.set_device = hpu.synchronize = lambda device=None: None
torch._register_device_module("hpu", hpu)
dist.Backend.register_backend("hccl", lambda *args, **kwargs: None, devices=["hpu"])
"""


@pytest.fixture
def installed_gcu(tmp_path, stand_in_device):
    """A directory holding an installed distribution `portlayer-gcu` (its dist-info with the entry point)."""
    return install_gcu(tmp_path)


def _run(code: str, *paths, env=None) -> dict:
    pythonpath = os.pathsep.join([str(REPO), *map(str, paths)])
    result = run_python(textwrap.dedent(code), fake_plugins=False, env={"PYTHONPATH": pythonpath, **(env or {})})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_an_installed_out_of_tree_backend_is_probed_first_and_selected(installed_gcu):
    seen = _run(
        """
        import json, os, sys, portlayer
        from portlayer import runtime
        print(json.dumps({
            "device_type": portlayer.device_type(),
            "dist_backend": portlayer.dist_backend(),
            "device": str(portlayer.device(1)),
            "probed": [probe.backend for probe in runtime.selection().probes],
            "order": [backend.name for backend in __import__("portlayer.backends").backends.PROBE_ORDER],
            "visible": os.environ.get("TOPS_VISIBLE_DEVICES"),
            "collective_module": "torch_gcu.distributed" in sys.modules,
        }))
        """,
        installed_gcu,
        env={"CUDA_VISIBLE_DEVICES": "3"},
    )
    assert seen == {
        "device_type": "gcu",
        "dist_backend": "eccl",
        "device": "gcu:1",
        "probed": ["gcu"],
        "order": ["gcu", "npu", "musa", "mlu", "hpu", "sdaa", "supa", "xpu", "cuda", "mps", "cpu"],
        "visible": "3",  # CUDA_VISIBLE_DEVICES carried over to the record's variable
        "collective_module": True,  # imported on selection, for init_process_group("eccl")
    }


def test_an_out_of_tree_record_with_a_vendor_api_is_a_migrate_and_preflight_target(installed_gcu):
    seen = _run(
        """
        import json
        from portlayer.migrate.engine import TARGETS, migrate_source
        from portlayer.preflight.cli import PLUGIN_BACKENDS as PREFLIGHT
        result = migrate_source("import torch\\nx = torch.ones(2).double().cuda()\\ntorch.cuda.synchronize()\\n", "gcu")
        print(json.dumps({"targets": list(TARGETS), "preflight": PREFLIGHT, "code": result.code,
                          "codes": [d.code for d in result.diagnostics]}))
        """,
        installed_gcu,
    )
    assert seen["targets"] == ["neutral", "torch", "gcu", "npu", "musa"]
    assert seen["preflight"] == ["gcu", "npu", "musa", "mlu", "hpu", "sdaa", "supa"]
    # the vendor import joins the torch import block (ruff I001)
    assert seen["code"] == "import torch\nimport torch_gcu\nx = torch.ones(2).double().gcu()\ntorch.gcu.synchronize()\n"
    assert seen["codes"] == ["PL501"]  # the record's dtype_risks say float64 is missing


# What a new interpreter has imported: the warm one has torch already.
@pytest.mark.real_interpreter
def test_import_portlayer_scans_no_entry_points_until_a_backend_is_selected(installed_gcu):
    seen = _run(
        """
        import json, sys
        from importlib import metadata
        scans = []
        real = metadata.entry_points
        def counting(*args, **kwargs):
            if kwargs.get("group") == "portlayer.backends":
                scans.append(1)
            return real(*args, **kwargs)
        metadata.entry_points = counting
        import portlayer, portlayer.backends, portlayer.api
        portlayer.backends.IN_TREE
        before = {"scans": len(scans), "torch": "torch" in sys.modules}
        portlayer.activate("cpu")
        portlayer.activate("cpu")
        print(json.dumps({"before": before, "after": len(scans)}))
        """,
        installed_gcu,
    )
    assert seen == {"before": {"scans": 0, "torch": False}, "after": 1}


def test_a_new_in_tree_record_is_selected_through_its_plugin(tmp_path, stand_in_device):
    fake_plugin(tmp_path, "torch_sdaa", "sdaa", "tccl", "SDAA_VISIBLE_DEVICES")
    seen = _run(
        """
        import json, os, portlayer
        print(json.dumps([portlayer.device_type(), portlayer.dist_backend(), os.environ.get("SDAA_VISIBLE_DEVICES")]))
        """,
        tmp_path,
        env={"CUDA_VISIBLE_DEVICES": "0,1"},
    )
    assert seen == ["sdaa", "tccl", "0,1"]


def test_gaudi_is_selected_through_its_dotted_plugin_and_imports_its_collective_module(tmp_path):
    package(tmp_path, "habana_frameworks.torch", GAUDI_PLUGIN)
    package(tmp_path, "habana_frameworks.torch.distributed.hccl")
    seen = _run(
        """
        import json, os, sys, portlayer
        print(json.dumps([portlayer.device_type(), portlayer.dist_backend(), os.environ.get("HABANA_VISIBLE_MODULES"),
                          "habana_frameworks.torch.distributed.hccl" in sys.modules]))
        """,
        tmp_path,
        env={"CUDA_VISIBLE_DEVICES": "2,3"},
    )
    assert seen == ["hpu", "hccl", "2,3", True]


def _gcu(name="gcu", **changes) -> Backend:
    return Backend(name=name, dist_backend="eccl", visible_devices_env="TOPS_VISIBLE_DEVICES", **changes)


def test_an_out_of_tree_record_with_an_in_tree_name_takes_its_place():
    newer_npu = _gcu("npu", vendor_api=VendorApi())
    order = probe_order((_gcu(), newer_npu))
    assert [backend.name for backend in order] == ["gcu", *(backend.name for backend in IN_TREE)]
    assert order[1] is newer_npu


class _EntryPoint:
    def __init__(self, name, value, loaded):
        self.name, self.value, self._loaded = name, value, loaded

    def load(self):
        if isinstance(self._loaded, Exception):
            raise self._loaded
        return self._loaded


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (
            [_EntryPoint("gcu", "portlayer_gcu:BACKEND", ModuleNotFoundError("No module named 'portlayer_gcu'"))],
            "backend 'gcu' (portlayer_gcu:BACKEND, entry point group portlayer.backends) cannot be loaded: "
            "ModuleNotFoundError: No module named 'portlayer_gcu'",
        ),
        (
            [_EntryPoint("gcu", "portlayer_gcu:make", len)],
            "backend 'gcu' (portlayer_gcu:make, entry point group portlayer.backends) is a "
            "builtin_function_or_method, not a portlayer.backends.Backend",
        ),
        (
            [_EntryPoint("tops", "portlayer_gcu:BACKEND", _gcu())],
            "backend 'tops' (portlayer_gcu:BACKEND, entry point group portlayer.backends) names its record "
            "'gcu': the two names must be the same",
        ),
        (  # a name that sorts before the record's, as well as one after
            [_EntryPoint("enflame", "portlayer_gcu:BACKEND", _gcu())],
            "backend 'enflame' (portlayer_gcu:BACKEND, entry point group portlayer.backends) names its record "
            "'gcu': the two names must be the same",
        ),
        (
            [_EntryPoint("gcu", "a:BACKEND", _gcu()), _EntryPoint("gcu", "b:BACKEND", _gcu())],
            "two installed backends are named 'gcu': a:BACKEND and b:BACKEND",
        ),
        (
            [_EntryPoint("gcu", "b:BACKEND", _gcu()), _EntryPoint("gcu", "a:BACKEND", _gcu())],
            "two installed backends are named 'gcu': b:BACKEND and a:BACKEND",
        ),
    ],
)
def test_a_broken_out_of_tree_backend_is_one_clear_error(monkeypatch, entries, message):
    monkeypatch.setattr(out_of_tree, "_entry_points", lambda: entries)
    with pytest.raises(PortlayerError) as error:
        out_of_tree.load()
    assert str(error.value) == message


def test_the_same_distribution_twice_on_the_path_is_loaded_once(monkeypatch):
    record = _gcu()
    # Two entry points read from two copies of its metadata: equal values, not one string object.
    twice = [_EntryPoint("gcu", "".join(["portlayer_gcu", ":BACKEND"]), record) for _ in range(2)]
    assert twice[0].value == twice[1].value and twice[0].value is not twice[1].value
    monkeypatch.setattr(out_of_tree, "_entry_points", lambda: twice)
    assert out_of_tree.load() == (record,)
