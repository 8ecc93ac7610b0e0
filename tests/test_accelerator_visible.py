"""The suite's two hosts (tests/accelerator.py): PORTLAYER_TESTS_ACCELERATOR shows the stand-in device as the
host's accelerator to the run and to the processes it starts; `hidden()` is a host without any."""

import textwrap

from tests.accelerator import NONE_VISIBLE, VARIABLE
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
    for vendor in ("npu", "musa"):
        result = run_python(SHOWN, fake_plugins=False, env={VARIABLE: vendor})
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == [vendor, vendor, "cpu"]


def test_without_the_variable_a_host_without_accelerators_has_none():
    result = run_python(SHOWN, fake_plugins=False, env=NONE_VISIBLE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["cpu", "cpu", "cpu"]
