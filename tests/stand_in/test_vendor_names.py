"""The stand-in device modules offer only names the real vendor modules have: a program that runs on the
stand-in cannot lean on a name torch_npu 2.14 or torch_musa v2.7.1 lacks."""

import json
import sys

import pytest

from tests.example_reference import REPO
from tests.fake_device import FAKE_PLUGINS

# Subpackages are attributes but not in `__all__`: torch_npu/npu/amp/ (torch.npu.amp.autocast, GradScaler).
SUBPACKAGES = {"npu": {"amp"}, "musa": set()}
RECORDS = {
    "npu": REPO / "tests" / "vendor_api" / "torch_npu_api-2.14.0.json",
    "musa": REPO / "tests" / "vendor_api" / "torch_musa_api.json",
}


@pytest.mark.parametrize("vendor", sorted(RECORDS))
def test_every_public_name_of_the_stand_in_module_exists_in_the_vendors(vendor, monkeypatch):
    monkeypatch.syspath_prepend(str(FAKE_PLUGINS))
    from fake_vendor.device_module import Vendor, build

    offered = build(Vendor(vendor, "stand-in", 2**30, None), device_count=2)
    public = {name for name in offered if not name.startswith("_")}
    real = set(json.loads(RECORDS[vendor].read_text())["names"]) | SUBPACKAGES[vendor]
    assert sorted(public - real) == []
    sys.modules.pop("fake_vendor.device_module", None)
