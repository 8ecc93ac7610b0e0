"""`portlayer parity run --strategy zero2|zero3|fsdp2` on the stand-in npu and musa matches the committed cpu DDP
baseline, and `parity compare` names the strategies' reduction order as the cause of what differs
(docs/parity.md).

zero2 and zero3 are DeepSpeed's engine: on the npu its own npu accelerator (hccl), on the musa portlayer's accelerator given
to DeepSpeed (mccl). fsdp2 is torch's `fully_shard` on a device mesh of the vendor's device type, over the
vendor's collective.

The stand-in computes with the cpu's kernels, so what differs from the baseline is the strategy's reduction
order alone; what this proves is the path: the strategy's engine on the vendor's device and collective.
gpt2-tiny's runs are killed part-way and resumed from their checkpoints, so one pair of jobs proves the strategy's
parity and its checkpoint on the vendor's device.
"""

import pytest

from portlayer.train.band import BANDS
from tests.stand_in.test_parity import BASELINE, portlayer
from tests.trainer.helpers import KILL_OPTIONS, TINY_PRESETS, assert_killed_with_a_checkpoint
from tests.trainer.test_strategies import ON_THE_CPU

BASELINES = BASELINE.parent

ENGINE = {
    ("zero2", "npu"): "ZeRO-2 on NPU_Accelerator (hccl)",
    ("zero2", "musa"): "ZeRO-2 on PortlayerAccelerator (mccl)",
    ("zero3", "npu"): "ZeRO-3 on NPU_Accelerator (hccl)",
    ("zero3", "musa"): "ZeRO-3 on PortlayerAccelerator (mccl)",
    ("fsdp2", "npu"): "torch fully_shard",
    ("fsdp2", "musa"): "torch fully_shard",
}


# Pairwise, not the full product of 3 presets x 3 strategies x 2 vendors (18 runs of 25-33 s on two cores). Each
# pair of factors is run at least once: every strategy on both vendors (the six engines of ENGINE: accelerator and
# collective) and every preset on both vendors (its model on each vendor's device), in these 6 runs; every preset
# under every strategy (the model's layers under the strategy's sharding) in these and the cpu's 3
# (tests/trainer/test_strategies.py: the layers are sharded the same on any device). That suffices because the
# vendor is independent of the preset under a strategy: the stand-in computes with the cpu's kernels on both, and
# what differs between them is the engine, which the strategy x vendor pairs cover.
VENDOR_OF = {
    ("gpt2-tiny", "zero3"): "musa", ("gpt2-tiny", "fsdp2"): "npu",
    ("bert-base-uncased-tiny", "zero2"): "npu", ("bert-base-uncased-tiny", "fsdp2"): "musa",
    ("mixtral-8x7b-tiny", "zero2"): "musa", ("mixtral-8x7b-tiny", "zero3"): "npu",
}  # fmt: skip
CASES = sorted((preset, strategy, vendor) for (preset, strategy), vendor in VENDOR_OF.items())
VENDORS = {vendor for _, vendor in ENGINE}
assert {(strategy, vendor) for _, strategy, vendor in CASES} == set(ENGINE), "a strategy x vendor pair is missing"
assert {(preset, vendor) for preset, _, vendor in CASES} == {(p, v) for p in TINY_PRESETS for v in VENDORS}, (
    "a preset x vendor pair is missing"
)
assert {(preset, strategy) for preset, strategy, _ in CASES} | ON_THE_CPU == {
    (p, s) for p in TINY_PRESETS for s, _ in ENGINE
}, "a preset x strategy pair is missing"

KILLED_AND_RESUMED = "gpt2-tiny"


@pytest.mark.parametrize(("preset", "strategy", "vendor"), CASES)
def test_strategy_on_the_stand_in_device_matches_the_cpu_ddp_baseline(
    preset, strategy, vendor, tmp_path, stand_in_device
):
    from portlayer.train import runfile

    out = tmp_path / "run.json"
    command = ("parity", "run", "--preset", preset, "--nproc", 2, "--strategy", strategy, "--out", out)
    if preset == KILLED_AND_RESUMED:
        command += ("--checkpoint-dir", tmp_path / "checkpoints")
        killed = portlayer(vendor, *command, *KILL_OPTIONS)
        assert_killed_with_a_checkpoint(killed.returncode, killed.stderr, tmp_path / "checkpoints", strategy)
        command += ("--resume",)
    run = portlayer(vendor, *command)
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
