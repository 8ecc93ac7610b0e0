"""The wrong-ports table (docs/parity.md "Wrong ports"): each deliberate mistake of tests/parity/wrong_ports.py,
trained on the cpu, is called diverged by the committed noise band against the cpu baseline of the same
experiment, at the step and in the quantity the mistake first shows, while the fixed criterion (Ascend's mean
relative loss error below 1%) passes every one of them. gpt2-tiny in fp32 on 1 rank x 2 micro-batches (the
baseline's global batch of 16), the 30-step schedule, 4 steps of it: every mistake here shows by then."""

import pytest

from portlayer.train import runfile
from portlayer.train.band import judge, read_band
from portlayer.train.compare import compare_logs
from portlayer.train.criteria import industry_criteria
from portlayer.train.logs import read_log
from portlayer.train.presets import get_preset
from portlayer.train.train import Options
from tests.parity.logs_data import band_path
from tests.parity.wrong_ports import train_wrong
from tests.trainer.conftest import torch_switches_kept
from tests.trainer.helpers import BASELINES

STEPS = 4

# mistake -> (the step it leaves the band, the quantity named first). Each follows from the mistake (step 1
# trains with lr 0, the warm-up's start, so a wrong update first moves step 3's gradients):
# - a learning rate, warm-up or schedule mistake changes the recorded lr of step 2;
# - dropout on: another forward at step 1 (loss and gradient norm);
# - the loss undivided: twice the gradients; AdamW hardly minds, but the recorded norm doubles at step 1;
# - clipping removed: step 2's update is unclipped, so step 3's gradients differ;
# - beta2 0.99: step 2's second moment differs little after bias correction; by step 4's gradients the norm
#   is out, beyond what another reduction of the norm moves it (band.FLOOR).
TABLE = {
    "learning rate x1.1": (2, "lr"),
    "warm-up one step longer": (2, "lr"),
    "gradient clipping removed": (3, "grad_norm"),
    "dropout left on": (1, "grad_norm"),
    "loss not divided by the micro-batches": (1, "grad_norm"),
    "schedule stepped at every micro-batch": (2, "lr"),
    "AdamW beta2 0.99 (not 0.999)": (4, "grad_norm"),
}


@pytest.fixture(scope="module")
def baseline():
    return read_log(BASELINES / "gpt2-tiny.cpu-cpu.json")  # 2 ranks x 1 micro-batch, with gradient norms


@pytest.mark.parametrize("mistake", sorted(TABLE))
def test_a_wrong_port_is_called_diverged_at_the_step_and_quantity_it_shows(mistake, baseline, tmp_path, portlayer_cache):
    preset = get_preset("gpt2-tiny")
    options = Options(
        preset=preset, steps=STEPS, schedule_steps=30, per_device_batch=preset.per_device_batch, grad_accum=2,
        seq_len=preset.seq_len, lr=preset.lr, warmup_steps=preset.warmup_steps, parity=True, quiet=True,
    )  # fmt: skip
    with torch_switches_kept():
        record = train_wrong(mistake, options)
    runfile.write_run(tmp_path / "wrong.json", record)
    comparison = compare_logs(baseline, read_log(tmp_path / "wrong.json"))
    verdict = judge(comparison, read_band(band_path("gpt2-tiny", "fp32")))

    assert not verdict.within
    step, out = verdict.first_out
    assert (step, out[0].quantity) == TABLE[mistake]
    ascend_mean = industry_criteria(comparison)[0]
    assert ascend_mean.passed  # the fixed 1% criterion misses it
    print(f"{mistake}: out at step {step} ({out[0].quantity}, {out[0].used:.3g} x the band); "
          f"mean relative loss error {ascend_mean.value:.2e}")  # fmt: skip
