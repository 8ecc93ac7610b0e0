"""A backend that another distribution adds: its record under the `portlayer.backends` entry-point group and a
fake plugin that registers its device with torch as a real one does (the stand-in device of tests/fake_plugins).

    root = install_gcu(tmp_path)    # then put root on the PYTHONPATH of a fresh interpreter
"""

from tests.fake_device import FAKE_PLUGINS

# A record as an out-of-tree distribution would ship it, with a fake plugin that registers "gcu".
RECORD = """
from portlayer.backends.base import Backend, VendorApi

BACKEND = Backend(
    name="gcu",
    dist_backend="eccl",
    visible_devices_env="TOPS_VISIBLE_DEVICES",
    vendor_module="torch_gcu",
    collective_module="torch_gcu.distributed",
    dtype_risks={"float64": "no float64 units"},
    launcher_env_prefixes=("ECCL", "TOPS"),
    vendor_api=VendorApi(),
)
"""


def package(root, dotted: str, text: str = ""):
    """The package `dotted` ("a.b": `root/a/__init__.py`, `root/a/b/__init__.py`), its own `__init__` holding `text`."""
    parts = dotted.split(".")
    for depth in range(1, len(parts) + 1):
        folder = root.joinpath(*parts[:depth])
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").touch()
    (folder / "__init__.py").write_text(text)


def fake_plugin(root, module: str, device: str, collective: str, visible_env: str) -> None:
    """A plugin `module` registering `device` like a real one (the stand-in device of tests/fake_plugins, 8
    devices); only it (not the stand-in torch_npu) is importable. Its tests ask for `stand_in_device`, so
    that the device is compiled before the plugin's process starts."""
    package(
        root,
        module,
        f"import os, sys\nsys.path.append({str(FAKE_PLUGINS)!r})\n"
        f"os.environ.setdefault('FAKE_{device.upper()}_DEVICE_COUNT', '8')\n"
        "from fake_vendor import install\nfrom fake_vendor.device_module import Vendor\n"
        f"install(sys.modules[__name__], Vendor({device!r}, 'fake', total_memory=2**30, capability=(0, 0)),\n"
        f"        collective={collective!r}, visible_env={visible_env!r})\n",
    )


def install_gcu(root):
    """`root` made to hold an installed distribution `portlayer-gcu` (its dist-info with the entry point, its
    record) and the fake plugin `torch_gcu`; the caller asks for `stand_in_device`, so that the device is
    compiled before the plugin's process starts. Returns `root`."""
    info = root / "portlayer_gcu-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: portlayer-gcu\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[portlayer.backends]\ngcu = portlayer_gcu:BACKEND\n")
    (root / "portlayer_gcu.py").write_text(RECORD)
    fake_plugin(root, "torch_gcu", "gcu", "eccl", "TOPS_VISIBLE_DEVICES")
    package(root, "torch_gcu.distributed")
    return root
