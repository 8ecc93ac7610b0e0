"""`portlayer parity run --strategy zero2` on the stand-in npu (DeepSpeed's own npu accelerator, hccl) and the
stand-in musa (portlayer's accelerator given to DeepSpeed, mccl) matches the committed cpu DDP baseline, and
`parity compare` names the strategies' reduction order as the cause of what differs (docs/parity.md).

The stand-in computes with the cpu's kernels, so what differs from the baseline is the strategy's reduction
order alone; what this proves is the path: DeepSpeed's engine on the vendor's device and collective.
"""

import pytest

from tests.stand_in.test_parity import BASELINE, portlayer

# DeepSpeed's npu accelerator reads CANN's install path; a real Ascend host has it from set_env.sh.
ACCELERATOR = {"npu": "NPU_Accelerator (hccl)", "musa": "PortlayerAccelerator (mccl)"}


@pytest.mark.parametrize("vendor", sorted(ACCELERATOR))
def test_zero2_on_the_stand_in_device_matches_the_cpu_ddp_baseline(vendor, tmp_path, stand_in_device, monkeypatch):
    from portlayer.train import runfile

    monkeypatch.setenv("ASCEND_HOME_PATH", str(tmp_path))
    out = tmp_path / "run.json"
    run = portlayer(vendor, "parity", "run", "--preset", "gpt2-tiny", "--nproc", 2, "--strategy", "zero2", "--out", out)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]

    metadata = runfile.read_run(out)["metadata"]
    assert (metadata["backend"], metadata["strategy"]) == (vendor, "zero2")
    assert metadata["strategy_engine"].endswith(f"ZeRO-2 on {ACCELERATOR[vendor]}")

    compare = portlayer(vendor, "parity", "compare", BASELINE, out)
    assert compare.returncode == 0, compare.stdout + compare.stderr
    assert "note: runs differ in strategy: baseline 'ddp', run 'zero2'" in compare.stdout
    assert compare.stdout.strip().splitlines()[-1].startswith("parity OK: 30 steps within rtol 1e-05")
