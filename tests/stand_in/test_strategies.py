"""`portlayer parity run --strategy zero2|zero3|fsdp2` on the stand-in npu and musa matches the committed cpu DDP
baseline, and `parity compare` names the strategies' reduction order as the cause of what differs
(docs/parity.md).

zero2 and zero3 are DeepSpeed's engine: on the npu its own npu accelerator (hccl), on the musa portlayer's accelerator given
to DeepSpeed (mccl). fsdp2 is torch's `fully_shard` on a device mesh of the vendor's device type, over the
vendor's collective.

The stand-in computes with the cpu's kernels, so what differs from the baseline is the strategy's reduction
order alone; what this proves is the path: the strategy's engine on the vendor's device and collective.
"""

import pytest

from portlayer.train.band import BANDS
from tests.stand_in.test_parity import BASELINE, portlayer

BASELINES = BASELINE.parent

ENGINE = {
    ("zero2", "npu"): "ZeRO-2 on NPU_Accelerator (hccl)",
    ("zero2", "musa"): "ZeRO-2 on PortlayerAccelerator (mccl)",
    ("zero3", "npu"): "ZeRO-3 on NPU_Accelerator (hccl)",
    ("zero3", "musa"): "ZeRO-3 on PortlayerAccelerator (mccl)",
    ("fsdp2", "npu"): "torch fully_shard",
    ("fsdp2", "musa"): "torch fully_shard",
}


# Every tiny preset under every sharded strategy on the npu; gpt2-tiny on both vendors.
CASES = sorted(
    {("gpt2-tiny", strategy, vendor) for strategy, vendor in ENGINE}
    | {(preset, strategy, "npu") for preset in ("bert-base-uncased-tiny", "mixtral-8x7b-tiny")
       for strategy in ("fsdp2", "zero2", "zero3")}
)


@pytest.mark.parametrize(("preset", "strategy", "vendor"), CASES)
def test_strategy_on_the_stand_in_device_matches_the_cpu_ddp_baseline(
    preset, strategy, vendor, tmp_path, stand_in_device
):
    from portlayer.train import runfile

    out = tmp_path / "run.json"
    run = portlayer(
        vendor, "parity", "run", "--preset", preset, "--nproc", 2, "--strategy", strategy, "--out", out
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]

    metadata = runfile.read_run(out)["metadata"]
    assert (metadata["backend"], metadata["device_type"], metadata["strategy"]) == (vendor, vendor, strategy)
    assert metadata["strategy_engine"].endswith(ENGINE[strategy, vendor])

    compare = portlayer(vendor, "parity", "compare", BASELINES / f"{preset}.cpu-cpu.json", out)
    assert compare.returncode == 0, compare.stdout + compare.stderr
    assert f"note: runs differ in strategy: baseline 'ddp', run '{strategy}'" in compare.stdout
    assert compare.stdout.strip().splitlines()[-1].startswith("parity OK: 30 steps within rtol 1e-05")

    # Judged by the committed band, the strategy's gradient norm on the vendor's device too.
    banded = portlayer(
        vendor, "parity", "compare", BASELINES / f"{preset}.cpu-cpu.json", out, "--band", BANDS / f"{preset}.fp32.json"
    )
    assert banded.returncode == 0, banded.stdout + banded.stderr
    assert banded.stdout.strip().splitlines()[-1].startswith(
        "within the band: 30 steps of loss, gradient norm, learning rate;"
    )
