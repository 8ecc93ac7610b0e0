"""Habits of real training scripts that the drop-in must survive on a host without CUDA: pinning memory on
their CUDA branch, importing a torch submodule after the drop-in line, and reading warnings that name
their own lines."""

import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import torch

import portlayer
from tests.accelerator import NONE_VISIBLE
from tests.processes import HUNG_S, REPO, run_python


def test_pin_memory_on_the_host_gives_a_copy_as_pinning_does(dropin):
    # nanoGPT's get_batch: `x.pin_memory().to(device, non_blocking=True)`, reached here because the
    # drop-in keeps the script's "cuda" strings. torch documents pin_memory as a copy in pinned memory.
    x = torch.arange(6).view(2, 3)
    pinned = x.pin_memory()
    assert pinned is not x and torch.equal(pinned, x) and pinned.dtype == x.dtype
    assert pinned.to("cuda", non_blocking=True).device.type == "cpu"
    pinned[0, 0] = 100
    assert x[0, 0] == 0


def test_pin_memory_raises_again_once_unpatched():
    # On a host without accelerators, where torch's own pin_memory has nothing to pin for (a process of its
    # own: one that has seen a device pins).
    code = textwrap.dedent(
        """
        import torch, portlayer
        portlayer.activate("cpu")
        portlayer.patch()
        print(torch.equal(torch.ones(1).pin_memory(), torch.ones(1)))
        portlayer.unpatch()
        try:
            torch.ones(1).pin_memory()
        except RuntimeError:
            print("raised")
        """
    )
    result = run_python(code, fake_plugins=False, env=NONE_VISIBLE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["True", "raised"]


def test_import_of_a_torch_submodule_keeps_the_dropin_bound():
    code = textwrap.dedent(
        """
        import sys
        import portlayer.torch as torch
        import torch.onnx
        import torch.nn as nn
        import torch.cuda.amp as amp

        def inside():
            import torch.utils.data
            return torch

        import json
        print(json.dumps([torch.__name__, inside().__name__, torch.onnx is sys.modules["torch.onnx"],
                          nn is sys.modules["torch.nn"], amp.__name__, str(torch.device("cuda:0"))]))
        """
    )
    result = run_python(code, fake_plugins=False, env={"PORTLAYER_BACKEND": "cpu"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == (
        '["portlayer.torch", "portlayer.torch", true, true, "portlayer.torch.cuda.amp", "cpu"]'
    )


def test_modules_that_import_plain_torch_keep_plain_torch():
    code = "import portlayer.torch\nimport torch\nimport torch.onnx\nprint(torch.__name__)\n"
    result = run_python(code, fake_plugins=False, env={"PORTLAYER_BACKEND": "cpu"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "torch"


def test_torchs_warnings_through_the_dropin_name_the_scripts_line(tmp_path):
    script = tmp_path / "habits.py"
    script.write_text(
        "import portlayer.torch as torch\n"
        "t = torch.ones(2)\n"
        "u = torch.tensor(t)\n"  # torch: "To copy construct from a tensor, it is recommended ..."
        "c = torch.ones(2, dtype=torch.complex64).to(torch.float32)\n"  # "Casting complex values to real ..."
    )
    env = {"PYTHONPATH": str(REPO), "PORTLAYER_BACKEND": "cpu"}
    result = subprocess.run(
        [sys.executable, "-W", "always", str(script)], capture_output=True, text=True, env=env, timeout=HUNG_S
    )
    assert result.returncode == 0, result.stderr
    located = [line.split(": ", 1)[0] for line in result.stderr.splitlines() if "Warning: " in line]
    assert located == [f"{script}:3", f"{script}:4"], result.stderr


def test_portlayers_own_warning_names_the_callers_line(dropin):
    # `with portlayer.patched():` undoes its patches on exit; one replaced meanwhile is left, with a
    # warning that must name the `with` line, not portlayer's or contextlib's frames.
    portlayer.unpatch()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with portlayer.patched():
                ours = vars(torch.nn.Module)["to"]
                torch.nn.Module.to = lambda self, *args, **kwargs: self
    finally:
        torch.nn.Module.to = ours.__wrapped__
        portlayer.patch()
    [warning] = [w for w in caught if "was replaced since" in str(w.message)]
    assert (warning.filename, warning.lineno) == (
        __file__,
        _line_of("with portlayer.patched():", after="names_the"),
    )


def _line_of(text: str, after: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if after in line)
    return next(i for i in range(start, len(lines)) if lines[i].strip() == text) + 1


def test_torch_cuda_functions_take_the_scripts_cuda_names_on_the_vendors_device():
    # nanoGPT under torchrun: `device = f"cuda:{local_rank}"; torch.cuda.set_device(device)`.
    from tests.fake_device import environment

    code = textwrap.dedent(
        """
        import portlayer.torch as torch
        torch.cuda.set_device("cuda:1")
        torch.cuda.synchronize("cuda:1")
        print(torch.cuda.current_device(), torch.cuda.memory_allocated(device="cuda:1"))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environment("npu"), timeout=HUNG_S
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "0"]
