"""Scale-out launch files: accelerate config files (taken by their content) and the `deepspeed` launcher in
shell scripts. What each target rewrites and reports, and what the migrated config does when accelerate
launches it (2 processes, on this cpu host and on the stand-in npu)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from portlayer.migrate.accelerate_config import migrate_config
from portlayer.migrate.shell import migrate_shell
from tests import accelerator, fake_device
from tests.migrate_cli.helpers import snapshot, write_tree
from tests.processes import HUNG_S

# As `accelerate config` writes it on a 2-GPU host (accelerate 1.15), with a user's comment.
CONFIG = """\
compute_environment: LOCAL_MACHINE
debug: false
distributed_type: MULTI_GPU  # two GPUs
downcast_bf16: 'no'
gpu_ids: 0,1
machine_rank: 0
main_training_function: main
mixed_precision: 'no'
num_machines: 1
num_processes: 2
use_cpu: false
"""
DISTRIBUTED_LINE, GPU_IDS_LINE = 3, 5

LAUNCH = """\
#!/bin/bash
# deepspeed --num_gpus 8 train.py  (a comment: not a command)
deepspeed --include localhost:0,1 --master_port 29500 \\
    train.py --deepspeed ds_zero2.json
NCCL_DEBUG=INFO deepspeed --num_gpus=2 --num_nodes 1 train.py
echo "launched with deepspeed"
python -m deepspeed.launcher.runner --hostfile hosts train.py
"""


def codes(result):
    return [(d.code, d.line) for d in result.diagnostics]


@pytest.mark.parametrize(("vendor", "kind"), [("npu", "MULTI_NPU"), ("musa", "MULTI_MUSA")])
def test_vendor_targets_write_the_vendors_distributed_type(vendor, kind):
    result = migrate_config(CONFIG, vendor)

    expected = CONFIG.replace("distributed_type: MULTI_GPU", f"distributed_type: {kind}")
    assert result.code == expected  # the comment, quoting and order kept
    assert [(c.code, c.line) for c in result.changes] == [("PL113", DISTRIBUTED_LINE)]
    assert codes(result) == [("PL611", GPU_IDS_LINE)]
    assert migrate_config(result.code, vendor).code == result.code


def test_neutral_leaves_the_config_and_warns_that_cpu_processes_train_alone():
    result = migrate_config(CONFIG, None)

    assert result.code == CONFIG
    assert codes(result) == [("PL612", DISTRIBUTED_LINE), ("PL611", GPU_IDS_LINE)]


def test_fp8_is_reported():
    result = migrate_config(CONFIG.replace("mixed_precision: 'no'", "mixed_precision: fp8"), "npu")
    assert ("PL613", 8) in codes(result)


def test_the_walk_takes_accelerate_configs_by_content_whatever_their_name(tmp_path, migrate):
    other_yaml = "distributed_type: MULTI_GPU\nlayers: 2\n"  # another tool's key of the same name
    write_tree(tmp_path, {"conf/launch_settings.yml": CONFIG, "conf/model.yaml": other_yaml, "train.py": "x = 1\n"})
    before = snapshot(tmp_path)

    run = migrate("--target", "npu", tmp_path)

    assert run.exit_code == 0, run.stdout
    after = snapshot(tmp_path)
    assert after["conf/launch_settings.yml"] == before["conf/launch_settings.yml"].replace(b"MULTI_GPU", b"MULTI_NPU")
    assert after["conf/model.yaml"] == before["conf/model.yaml"]
    assert "PL611" in run.stdout and "model.yaml" not in run.stdout


@pytest.mark.parametrize("target", ["neutral", "torch", "npu"])
def test_the_deepspeed_launcher_is_left_where_deepspeed_has_the_accelerator(target):
    result = migrate_shell(LAUNCH, target)

    assert result.code == LAUNCH
    launcher = [d for d in result.diagnostics if d.code == "PL609"]
    assert [(d.line, d.col) for d in launcher] == [(3, 1), (5, 17), (7, 1)]
    assert "(--include)" in launcher[0].message
    assert "(--num_gpus, --num_nodes)" in launcher[1].message
    assert "(--hostfile)" in launcher[2].message


def test_the_deepspeed_launcher_is_reported_where_deepspeed_has_no_accelerator():
    result = migrate_shell(LAUNCH, "musa")
    assert [d.line for d in result.diagnostics if d.code == "PL610"] == [3, 5, 7]
    assert not any(d.code == "PL609" for d in result.diagnostics)


def test_a_script_whose_only_cuda_site_is_the_launcher_is_read(tmp_path, migrate):
    write_tree(tmp_path, {"run.sh": "#!/bin/bash\ndeepspeed --num_gpus 2 train.py\n"})
    run = migrate("--target", "npu", tmp_path)
    assert "run.sh:2:1: PL609" in run.stdout


# -- what accelerate does with the migrated config ---------------------------------------------------

PROGRAM = """\
from accelerate import Accelerator

accelerator = Accelerator()
print(f"{accelerator.distributed_type.value} processes={accelerator.num_processes} device={accelerator.device.type};", flush=True)
"""


def launch(folder: Path, env: dict) -> list[str]:
    env = {**env, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", "config.yaml", "program.py"]
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=HUNG_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # The ranks share one pipe: a line may run into another's.
    return re.findall(r"[A-Z_]+ processes=\d+ device=\w+;", done.stdout)


def prepared(tmp_path: Path, migrate, target: str) -> Path:
    write_tree(tmp_path, {"config.yaml": CONFIG, "program.py": PROGRAM})
    assert migrate("--exit-zero", "--target", target, tmp_path / "config.yaml").exit_code == 0
    return tmp_path


def test_the_npu_config_launches_a_process_group_on_the_stand_in_npu(tmp_path, migrate):
    env = fake_device.environment("npu", {k: v for k, v in os.environ.items() if not k.startswith("PORTLAYER_")})
    assert launch(prepared(tmp_path, migrate, "npu"), env) == ["MULTI_NPU processes=2 device=npu;"] * 2


def test_pl612_the_neutral_config_on_a_host_without_accelerator_launches_lone_processes(tmp_path, migrate):
    """The reason PL612 gives, pinned: accelerate 1.15 on the cpu forms no group for MULTI_GPU."""
    # accelerate writes the config's `gpu_ids: 0,1` into CUDA_VISIBLE_DEVICES for the processes it starts.
    env = accelerator.hidden_from_launched({k: v for k, v in os.environ.items() if not k.startswith(("PORTLAYER_", "FAKE_"))})
    assert launch(prepared(tmp_path, migrate, "neutral"), env) == ["NO processes=1 device=cpu;"] * 2
