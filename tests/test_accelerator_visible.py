"""The suite's two hosts (tests/accelerator.py): PORTLAYER_TESTS_ACCELERATOR shows the stand-in device as the
host's accelerator to the run and to the processes it starts; `hidden()` is a host without any."""

import textwrap

from tests.accelerator import NONE_VISIBLE, VARIABLE, devices_stay_hidden
from tests.processes import run_python

# What tests/conftest.py does at import, then the backend this process and a process it starts select.
SHOWN = textwrap.dedent(
    """
    import subprocess, sys
    from tests import accelerator
    accelerator.show()
    import portlayer
    print(portlayer.activate().name)
    child = "import portlayer; print(portlayer.activate().name)"
    print(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True).stdout.strip())
    hidden = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True,
                            env=accelerator.hidden())
    print(hidden.stdout.strip())
    """
)


def test_the_stand_in_is_the_accelerator_of_the_run_and_of_its_processes_until_hidden():
    # The variable names the vendor as a string, which reaches both stand-ins by one path: the npu shows it.
    result = run_python(SHOWN, fake_plugins=False, env={VARIABLE: "npu"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["npu", "npu", "cpu"]


def test_without_the_variable_a_host_without_accelerators_has_none():
    result = run_python(SHOWN, fake_plugins=False, env=NONE_VISIBLE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["cpu", "cpu", "cpu"]


def test_devices_kept_hidden_stay_hidden_where_a_launcher_shows_them_again(stand_in_device):
    """A launcher that writes the visible-devices variable for its ranks (accelerate's `gpu_ids: 0,1`, DeepSpeed's
    `--num_gpus 2`), here over the stand-in npu's: the ranks of a host kept without accelerators still see none."""
    launched = {**stand_in_device("npu"), "ASCEND_RT_VISIBLE_DEVICES": "0,1"}
    child = "import portlayer; print(portlayer.activate().name)"
    shown = run_python(child, fake_plugins=False, env=launched)
    kept_hidden = run_python(child, fake_plugins=False, env=devices_stay_hidden(launched))
    assert (shown.returncode, kept_hidden.returncode) == (0, 0), shown.stderr + kept_hidden.stderr
    assert (shown.stdout.strip(), kept_hidden.stdout.strip()) == ("npu", "cpu")
