"""Migrated code keeps what it means (docs/migrate.md, "Meaning"): each idiom of the issue's table is
migrated and then run on a host without accelerators, where the original's answers are those of a host
without CUDA: no accelerator-only branch runs, device strings stay strings, and the program's own cpu
fallback is taken.

The neutral target asks portlayer, which this process holds to its cpu backend; the torch target asks torch
itself, which on a GPU host sees CUDA here, so its code runs in a fresh process with the devices hidden
(tests/accelerator.py). Either way a test reads the program's answers through `reading`: statements run in
the program's names after it, binding `read` to what JSON carries back."""

import json

import pytest
import torch

from portlayer.migrate.engine import migrate_source
from tests.accelerator import NONE_VISIBLE
from tests.processes import fresh_process_json

RUN_TARGETS = ("neutral", "torch")  # the vendors' own API needs their plugin to run


pytestmark = pytest.mark.usefixtures("cpu_backend")


# Executes CODE as a module, the warnings it gave bound to `warned`, then READING in its names.
RUN = """
import warnings
namespace = {"__name__": "migrated"}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    exec(compile(CODE, TARGET, "exec"), namespace)
namespace["warned"] = [str(w.message) for w in caught]
exec(READING, namespace)
read = namespace["read"]
"""


def run_migrated(source: str, target: str, reading: str):
    """Migrate `source`, check a second run changes nothing, execute it on a host without accelerators and
    return what `reading` bound to `read` there, as JSON carries it (tuples become lists)."""
    result = migrate_source(source, target)
    assert migrate_source(result.code, target).changes == ()
    bound = f"CODE, TARGET, READING = {result.code!r}, {f'<{target}>'!r}, {reading!r}\n"
    if target == "torch":
        return fresh_process_json(bound + RUN + "import json; print(json.dumps(read))",
                                  env=NONE_VISIBLE, fake_plugins=False)  # fmt: skip
    scope: dict = {}
    exec(bound + RUN, scope)
    return json.loads(json.dumps(scope["read"]))


NANOGPT_STYLE = '''
import torch
rank = 1
device = f'cuda:{rank}'
device_type = 'cuda' if 'cuda' in device else 'cpu'
x = torch.arange(4.0)
if device_type == 'cuda':
    x = x.pin_memory().to(device, non_blocking=True)
else:
    x = x.to(device)
on_accelerator = x.is_cuda
not_on_accelerator = not x.is_cuda
by_type = x.device.type == "cuda"
mps_or_cuda = device_type in ("cuda", "mps")
'''


@pytest.mark.parametrize("target", RUN_TARGETS)
def test_device_string_stays_a_string_and_the_pin_memory_branch_is_off_on_the_cpu(target):
    ran = run_migrated(NANOGPT_STYLE, target, "read = (isinstance(device, str), torch.device(device).type, "
                       "device_type, x.device.type, on_accelerator, not_on_accelerator, by_type, mps_or_cuda)")
    assert ran == [True, "cpu", "cpu", "cpu", False, True, False, False]


FORMATTED = '''
import torch
def devices(i):
    return (torch.device("cuda:{}".format(i)), torch.device("cuda:%d" % i),
            torch.zeros(1).to("cuda:" + str(i)).device, "cuda:{}".format(i))
first, second, third, fourth = devices(0)
'''


@pytest.mark.parametrize("target", RUN_TARGETS)
def test_device_strings_built_with_format_percent_and_plus_are_converted(target):
    result = migrate_source(FORMATTED, target)
    assert [c.code for c in result.changes if c.code == "PL101"] == ["PL101"] * 3
    ran = run_migrated(FORMATTED, target, "read = first.type, second.type, third.type, fourth")
    assert ran[:3] == ["cpu"] * 3
    assert ran[3] == "cuda:0"  # not bound to a device name: reported (PL405), not guessed
    assert [d.code for d in result.diagnostics] == ["PL405"]


GUARDED = '''
import warnings
import torch
cuda_kwargs = {}
graph = None
if torch.cuda.is_available():
    cuda_kwargs = {"num_workers": 1, "pin_memory": True, "shuffle": True}
    graph = torch.cuda.CUDAGraph()
    warnings.warn("You have a CUDA device, so use it")
count = torch.cuda.device_count()
device_id = 3 % torch.cuda.device_count()  # the DDP tutorial's placement: a device index on the cpu too
'''


@pytest.mark.parametrize("target", RUN_TARGETS)
def test_is_available_guarding_accelerator_only_code_keeps_its_meaning(target):
    ran = run_migrated(GUARDED, target, "read = cuda_kwargs, graph is None, warned, count, device_id")
    assert ran == [{}, True, [], 0, 0]
    assert "PL402" in [d.code for d in migrate_source(GUARDED, target).diagnostics]


DISTRIBUTED_AT_IMPORT = '''
import torch
import torch.distributed as dist
torch.cuda.set_device(0)
torch.cuda.synchronize()
with torch.cuda.stream(torch.cuda.current_stream()):
    pass
backend = "nccl"
device = torch.device("cuda")
device_type = "cuda"
default_backend = dist.get_default_backend_for_device("cuda") if hasattr(dist, "get_default_backend_for_device") else "gloo"
'''


def test_torch_target_falls_back_to_the_cpu_at_import_without_an_accelerator():
    ran = run_migrated(DISTRIBUTED_AT_IMPORT, "torch", "read = (torch.accelerator.current_accelerator("
                       "check_available=True) is None, backend, str(device), device_type)")
    assert ran == [True, "gloo", "cpu", "cpu"]  # the host has no accelerator, and the program knows it


@pytest.mark.parametrize("target", ("neutral", "torch", "npu", "musa"))
def test_one_change_per_edit(target):
    """`torch.device("cuda")` is one edit: no second, phantom `'cuda' -> "cuda"` (the counts are a report)."""
    result = migrate_source('import torch\nd = torch.device("cuda")\n', target)
    assert [c.code for c in result.changes if c.code != "PL110"] == ["PL101"]


SORTED_SOURCES = {
    "sections.py": '"""Doc."""\nimport os\nimport sys\n\nimport numpy as np\nimport torch\n'
                   'import torch.distributed as dist\nfrom torch import nn\n\nfrom .model import Net\n\n'
                   'torch.cuda.synchronize()\ndist.init_process_group("nccl")\n',
    "free_torch.py": 'import os\n\nimport torch.nn as nn\nimport yaml\nfrom torch.utils.data import DataLoader\n\n'
                     't = torch.cuda.is_available()\n',
}


@pytest.mark.parametrize("target", ("neutral", "torch", "npu", "musa"))
def test_added_imports_are_sorted_into_the_third_party_group(target, tmp_path):
    """ruff's isort (I001) finds the migrated files as sorted as their originals were."""
    import subprocess
    import sys

    for name, source in SORTED_SOURCES.items():
        (tmp_path / name).write_text(migrate_source(source, target).code)
    # Run where the files are: ruff takes the folder it runs in as the first-party code.
    checked = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--select", "I001",
                              *SORTED_SOURCES], cwd=tmp_path, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout


def test_diff_of_an_absolute_path_has_a_valid_header(tmp_path):
    """`--diff /abs/path.py`: `a/abs/path.py`, not `a//abs/path.py`; `patch -p1` from / applies it."""
    import shutil
    import subprocess

    from portlayer.migrate.job import unified_diff

    script = tmp_path / "train.py"
    script.write_text("import torch\ntorch.cuda.synchronize()\n")
    patch = unified_diff(str(script), script.read_text(), migrate_source(script.read_text()).code)
    assert patch.splitlines()[:2] == [f"--- a{script}", f"+++ b{script}"]
    if shutil.which("patch"):
        applied = subprocess.run(["patch", "-p1", "-d", "/"], input=patch, text=True, capture_output=True)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        assert script.read_text() == migrate_source("import torch\ntorch.cuda.synchronize()\n").code


@pytest.mark.parametrize(("target", "says", "never"), [
    ("neutral", "portlayer.device(i)", "torch.accelerator"),
    ("torch", "torch.accelerator.current_accelerator(check_available=True)", "portlayer"),
    ("npu", '`"npu:N"`', "portlayer"),
    ("musa", '`"mccl"`', "portlayer"),
])
def test_the_hint_for_an_unconverted_device_string_is_in_the_targets_own_terms(target, says, never):
    (diagnostic,) = migrate_source("gpus = ['cuda:0']\n", target).diagnostics
    assert diagnostic.code == "PL405" and says in diagnostic.hint and never not in diagnostic.hint


def test_a_function_level_import_the_rewrite_left_unused_goes_and_its_block_stays_a_block():
    source = ("import torch\n\n\ndef step(model, x):\n    try:\n        from torch.cuda.amp import autocast\n"
              "    except ImportError:\n        return model(x)\n    with autocast():\n        return model(x)\n")
    code = migrate_source(source).code
    assert "torch.cuda" not in code and "    try:\n        pass\n    except ImportError:" in code
    compile(code, "<migrated>", "exec")


DDP_TUTORIAL_SHAPE = '''
import os
import torch


class Trainer:
    def __init__(self, model, snapshot_path):
        self.gpu_id = int(os.environ.get("LOCAL_RANK", "0"))
        self.model = model.to(self.gpu_id)
        self.snapshot_path = snapshot_path

    def save(self):
        torch.save({"weight": self.model.weight}, self.snapshot_path)

    def resume(self):
        loc = f"cuda:{self.gpu_id}"
        return torch.load(self.snapshot_path, map_location=loc)

    def batch(self, source):
        return source.to(self.gpu_id)
'''


@pytest.mark.parametrize("target", RUN_TARGETS)
def test_an_int_gpu_id_and_a_map_location_string_place_on_the_active_backend(target, tmp_path):
    ran = run_migrated(DDP_TUTORIAL_SHAPE, target, f"""
trainer = Trainer(torch.nn.Linear(2, 2), {str(tmp_path / "snapshot.pt")!r})
trainer.save()
read = trainer.resume()["weight"].device.type, trainer.batch(torch.ones(1)).device.type, type(trainer.gpu_id).__name__
""")
    assert ran == ["cpu", "cpu", "int"]
    assert [c.code for c in migrate_source(DDP_TUTORIAL_SHAPE, target).changes if c.code == "PL101"] == ["PL101"] * 3


MINGPT_SET_SEED = '''
import random
import numpy as np
import torch
def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.cuda.manual_seed(seed)
set_seed(3)
drawn = torch.rand(2)
'''


@pytest.mark.parametrize("target", RUN_TARGETS)
def test_seeding_every_cuda_device_does_nothing_where_there_is_no_accelerator(target):
    # minGPT's mingpt/utils.py set_seed: torch.cpu, the torch target's device module here, has no
    # manual_seed_all; torch.cuda's queues the call until CUDA starts, so without CUDA it does nothing.
    ran = run_migrated(MINGPT_SET_SEED, target, "read = drawn.tolist()")
    torch.manual_seed(3)
    assert ran == torch.rand(2).tolist()


# pytorch/examples distributed/ddp/example.py (the multi-GPU-per-process demo), in one process of a gloo group.
DDP_DEVICES_PER_PROCESS = '''
import tempfile
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

def demo_basic(local_world_size, local_rank):
    n = torch.cuda.device_count() // local_world_size
    device_ids = list(range(local_rank * n, (local_rank + 1) * n))
    model = nn.Linear(10, 5).cuda(device_ids[0])
    ddp_model = DDP(model, device_ids)
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.001)
    optimizer.zero_grad()
    outputs = ddp_model(torch.randn(20, 10))
    labels = torch.randn(20, 5).to(device_ids[0])
    loss_fn(outputs, labels).backward()
    optimizer.step()
    return device_ids, next(ddp_model.parameters()).device.type

with tempfile.TemporaryDirectory() as folder:  # the file store removes its file when it is done
    dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=0, world_size=1)
    try:
        device_ids, placed = demo_basic(2, 1)
    finally:
        dist.destroy_process_group()
'''


@pytest.mark.parametrize("target", RUN_TARGETS)
def test_devices_per_process_from_the_count_give_each_rank_at_least_one(target):
    # The count feeds placement arithmetic: 0 // 2 devices gave rank 1 an empty list, and
    # `model.cuda(device_ids[0])` an IndexError; the list variable given to DDP and `.to(device_ids[0])`
    # went unconverted and unreported.
    ran = run_migrated(DDP_DEVICES_PER_PROCESS, target, "read = device_ids, placed")
    assert ran == [[1], "cpu"]
    assert migrate_source(DDP_DEVICES_PER_PROCESS, target).diagnostics == ()


AMP_STEP = '''
import torch
from torch import nn

def step(model, x):
    scaler = torch.cuda.amp.GradScaler(enabled=False)
    with torch.cuda.amp.autocast(dtype=torch.bfloat16):
        y = model(x)
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
        z = model(x)
    device_type = "cuda" if torch.cuda.is_available() else "cpu"
    return scaler.is_enabled(), y.dtype, z.dtype, device_type

answers = step(nn.Linear(2, 2), torch.ones(1, 2))
'''


def test_the_torch_target_names_the_device_type_once_below_the_imports():
    # Four sites in a 10-line function each spelled out the accelerator-or-cpu expression; people read
    # and keep migrated code, so it is one module-level name, defined once next to the imports.
    code = migrate_source(AMP_STEP, "torch").code
    definition = 'DEVICE_TYPE = (torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type'
    assert code.splitlines()[3] == definition and code.count("current_accelerator(check_available=True)") == 1
    assert code.count("DEVICE_TYPE") == 5
    ran = run_migrated(AMP_STEP, "torch", "read = [str(answer) for answer in answers]")
    assert ran == ["False", "torch.bfloat16", "torch.bfloat16", "cpu"]


def test_a_file_that_binds_the_name_keeps_the_expression_at_each_site():
    source = 'import torch\nDEVICE_TYPE = "x"\nwith torch.autocast(device_type="cuda"):\n    pass\n'
    assert "(torch.accelerator.current_accelerator(check_available=True) or" in migrate_source(source, "torch").code


CURRENT_DEVICE_GIVEN = """
import torch
x = torch.zeros(2, device=torch.cuda.current_device())
y = torch.ones(1).to(torch.cuda.current_device())
d = torch.device(torch.cuda.current_device())
def allocate(n):
    device = torch.cuda.current_device()
    return torch.zeros(n, device=device)
z = allocate(2)
"""


@pytest.mark.parametrize("target", RUN_TARGETS)
def test_the_current_device_given_as_a_device_places_on_the_cpu_where_there_is_no_accelerator(target):
    # Megatron-LM's `device=torch.cuda.current_device()`: an int, which torch makes the accelerator's device.
    # Held by a name read only as a device, too.
    read = run_migrated(CURRENT_DEVICE_GIVEN, target, "read = [str(x.device), str(y.device), str(d), str(z.device)]")
    assert read == ["cpu", "cpu", "cpu", "cpu"]
