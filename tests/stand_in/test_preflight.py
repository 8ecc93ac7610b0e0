"""`portlayer preflight --target npu` (which records the step on the cpu) reaches the same verdict as the
same step recorded on the stand-in npu itself, through the public API (`portlayer.preflight.check`).

Agreeing means: the same verdict, the same missing ops, and the same ops dispatched but for the DDP bucket
copies of the CLI's step. The CLI's step runs npu's kernels where the cpu's differ (dropout fused into
`native_dropout` as on the device, `preflight.target_kernels`), and, like the device's step here, is a step
after the first (AdamW's state exists).
"""

import json
import os
import subprocess
import sys

from tests.example_reference import REPO
from tests.fake_device import environment
from tests.processes import HUNG_S

COMMITTED = REPO / "portlayer" / "preflight" / "oplists" / "npu-2.14.0.txt"

ON_THE_DEVICE = r"""
import json, sys
import torch, torch_npu
from portlayer import preflight
from portlayer.train import presets

# The step `portlayer preflight --preset gpt2-tiny` records: the trainer's model (dropout on), batch 1,
# the preset's sequence length up to 128, AdamW, gradient clipping; the second step, as the CLI's.
preset = presets.get_preset("gpt2-tiny")
model = presets.build_model(preset, parity=False).to("npu")
batch = {k: v.to("npu") for k, v in presets.example_batch(preset, batch_size=1, seq_len=min(preset.seq_len, 128)).items()}
optimizer = torch.optim.AdamW(model.parameters(), lr=preset.lr, weight_decay=preset.weight_decay)
model(**batch).loss.backward()
optimizer.step()
optimizer.zero_grad(set_to_none=True)
report = preflight.check(model, batch, optimizer, "npu", kernels=sys.argv[1], clip_grad_norm=preset.max_grad_norm)
print(json.dumps(report.as_dict()))
"""


# What only the CLI's step dispatches: it runs under DDP (the default strategy), whose reducer views each
# gradient into its bucket and copies it there; the device side here calls the API without DDP. AdamW steps
# with `_foreach_*` on both: the CLI records the step as a device runs it.
ONLY_ON_CPU = {"aten::as_strided", "aten::copy_"}


def missing(report: dict) -> set:
    return {entry["op"] for entry in report["missing"]}


def dispatched(report: dict) -> set:
    return {entry["op"] for entry in report["ops"]}


def test_a_step_recorded_on_the_cpu_agrees_with_the_same_step_on_the_device(tmp_path, stand_in_device):
    kernels = tmp_path / "npu.txt"
    # The committed torch_npu list without tanh (gpt2's gelu_new uses it): a verdict to agree on.
    kept = [line for line in COMMITTED.read_text().splitlines(True) if not line.startswith("aten::tanh")]
    kernels.write_text("".join(kept))

    cpu_report = tmp_path / "cpu.json"
    plain = {k: v for k, v in os.environ.items() if not k.startswith(("PORTLAYER_BACKEND", "FAKE_"))}
    on_cpu = subprocess.run(
        [sys.executable, "-m", "portlayer", "preflight", "--preset", "gpt2-tiny", "--target", "npu",
         "--kernels", kernels, "--report", cpu_report],
        capture_output=True, text=True, env=plain, cwd=REPO, timeout=HUNG_S,
    )  # fmt: skip
    on_device = subprocess.run(
        [sys.executable, "-c", ON_THE_DEVICE, str(kernels)],
        capture_output=True, text=True, env=environment("npu"), cwd=REPO, timeout=HUNG_S,
    )  # fmt: skip
    assert on_device.returncode == 0, on_device.stderr[-3000:]
    device = json.loads(on_device.stdout.strip().splitlines()[-1])
    cpu = json.loads(cpu_report.read_text())

    assert on_cpu.returncode == device["exit_code"] == 1, on_cpu.stdout + on_cpu.stderr
    assert missing(cpu) == missing(device) == {"aten::tanh", "aten::tanh_backward"}
    assert dispatched(cpu) - ONLY_ON_CPU == dispatched(device)
    assert dispatched(cpu) >= ONLY_ON_CPU
    assert {"aten::native_dropout", "aten::native_dropout_backward"} <= dispatched(cpu)
