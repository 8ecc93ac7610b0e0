"""A rank whose device index this process cannot see (more ranks on a node than devices): one line that names
the rank, the index asked for and the devices seen, not the runtime's own error from the first kernel."""

import subprocess
import sys
import textwrap

from portlayer.train.process_group import ProcessGroup
from tests.fake_device import environment
from tests.processes import HUNG_S, run_python

ONE_DEVICE = {"PORTLAYER_BACKEND": "npu", "FAKE_NPU_DEVICE_COUNT": "1", "LOCAL_RANK": "1"}

SET_DEVICE = textwrap.dedent(
    """
    import portlayer
    from portlayer.errors import PortlayerError
    portlayer.set_device(0)
    import portlayer.torch as torch
    for ask in (lambda: portlayer.set_device(1), lambda: portlayer.set_device("npu:1"),
                lambda: torch.cuda.set_device(torch.device("cuda", 1))):
        try:
            ask()
        except PortlayerError as error:
            print(error)
    print(portlayer.current_device())
    """
)


def test_set_device_names_the_rank_the_index_and_the_devices_seen():
    result = run_python(SET_DEVICE, env=ONE_DEVICE)
    assert result.returncode == 0, result.stderr
    line = (
        "local rank 1 asked for npu:1, but this process sees 1 device (npu:0): "
        "start at most 1 rank per node, or make more devices visible"
    )
    assert result.stdout.splitlines() == [line, line, line, "0"]


def test_the_visible_devices_variable_is_named_with_the_devices_it_leaves():
    code = "import portlayer\nportlayer.set_device(2)"
    result = run_python(code, env={**ONE_DEVICE, "FAKE_NPU_DEVICE_COUNT": "4", "ASCEND_RT_VISIBLE_DEVICES": "2,3"})
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "portlayer.errors.PortlayerError: local rank 1 asked for npu:2, but this process sees 2 devices "
        "(npu:0 to npu:1; ASCEND_RT_VISIBLE_DEVICES=2,3): start at most 2 ranks per node, or make more devices visible"
    )


def test_two_ranks_of_parity_run_on_a_one_device_host_end_with_one_line(tmp_path):
    command = [sys.executable, "-m", "portlayer", "parity", "run", "--preset", "gpt2-tiny", "--nproc", "2",
               "--steps", "1", "--out", str(tmp_path / "run.json")]  # fmt: skip
    with ProcessGroup(command, cwd=tmp_path, env=environment("npu", devices=1), stdout=subprocess.PIPE,
                      stderr=subprocess.STDOUT, text=True) as group:  # fmt: skip
        output = group.communicate(HUNG_S)
    assert group.process.returncode == 1
    assert output == (
        "portlayer: error: parity run of gpt2-tiny on 2 process(es) failed: rank 1: local rank 1 asked for npu:1, "
        "but this process sees 1 device (npu:0): start at most 1 rank per node, or make more devices visible\n"
    )
    assert not (tmp_path / "run.json").exists()
