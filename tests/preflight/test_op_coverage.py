"""preflight records a real training step and reports the ops a target lacks, with where they came from.

Run as a script, this file is the vendor side of the plugin test: it registers a fake npu backend with real
kernels for some ops and prints what preflight says (privateuse1 can be renamed once per process).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from portlayer import preflight
from portlayer.preflight.kernels import KernelSource, is_composite
from tests.processes import HUNG_S

REPO = Path(__file__).resolve().parents[2]
# Ops the fake plugin leaves out: one from the forward, one only the backward dispatches.
LEFT_OUT = {"aten::isin.Tensor_Tensor", "aten::tanh_backward"}


class StopMask(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("stop_ids", torch.tensor([0, 1]))

    def forward(self, ids):
        return ~torch.isin(ids, self.stop_ids)  # the isin line


class SelfAttention(nn.Module):
    def forward(self, h):
        q = h.unsqueeze(1)
        return F.scaled_dot_product_attention(q, q, q).squeeze(1)


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.mask = StopMask()
        self.attn = SelfAttention()
        self.act = nn.Tanh()
        self.head = nn.Linear(8, 16)

    def forward(self, ids, labels):
        h = self.embed(ids) * self.mask(ids).unsqueeze(-1)
        logits = self.head(self.act(self.attn(h)))
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())


def tiny_step():
    torch.manual_seed(0)
    model = Tiny()
    ids = torch.randint(0, 16, (2, 6))
    return model, (ids, ids.roll(1, dims=1)), torch.optim.Adam(model.parameters(), lr=1e-3)


def everything_native(target="npu"):
    return KernelSource(target, "list", "test list", lambda op: True)


def line_of(marker: str) -> int:
    return next(n for n, line in enumerate(Path(__file__).read_text().splitlines(), 1) if line.endswith(marker))


def test_records_each_phase_with_dtypes_and_origins():
    ops = preflight.record_step(*tiny_step()).ops

    isin = ops["aten::isin.Tensor_Tensor"]
    assert (isin.count, isin.dtypes, isin.phases) == (1, {"int64", "bool"}, {"forward"})
    assert (isin.first.phase, isin.first.module) == ("forward", "mask")
    assert isin.first.location.endswith(f"test_op_coverage.py:{line_of('# the isin line')}")

    # Backward ops are traced to the forward call that built their autograd node.
    tanh_backward = ops["aten::tanh_backward"]
    assert tanh_backward.phases == {"backward"}
    assert (tanh_backward.first.autograd_node, tanh_backward.first.module) == ("TanhBackward0", "act")
    assert tanh_backward.first.location == ops["aten::tanh"].first.location

    adam = ops["aten::addcdiv_"]  # once per parameter: embed.weight, head.weight, head.bias
    assert (adam.first.phase, adam.first.module, adam.count) == ("optimizer", "Adam.step", 3)


def test_cpu_attention_kernels_are_reported_as_the_op_the_model_called():
    ops = preflight.record_step(*tiny_step()).ops
    attention = ops["aten::scaled_dot_product_attention"]
    assert attention.recorded_as == {
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
    }
    assert attention.phases == {"forward", "backward"}
    assert not any(name.endswith("_for_cpu") or "_for_cpu_" in name for name in ops)


def test_a_step_with_all_kernels_passes():
    report = preflight.check(*tiny_step(), kernels=everything_native())
    assert report.exit_code == 0 and not report.missing
    assert report.render() == report.verdict()
    assert report.verdict().startswith(f"preflight npu: all {len(report.ops)} ops native")
    assert report.verdict().endswith("(source: test list)")


def test_float64_is_a_risk_on_npu_even_with_kernels():
    model, batch, optimizer = tiny_step()
    report = preflight.check(model, batch, optimizer, kernels=everything_native(),
                             loss_fn=lambda loss: loss.double() * 2)
    risky = {risk.use.op for risk in report.dtype_risks}
    assert "aten::mul.Tensor" in risky and all(risk.dtype == "float64" for risk in report.dtype_risks)
    assert report.exit_code == 1
    assert "float64" in report.render() and "use a dtype the target lacks" in report.verdict()


def test_a_model_output_without_a_loss_is_a_clear_error():
    model = nn.Linear(4, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    try:
        preflight.check(model, torch.ones(2, 4), optimizer, kernels=everything_native())
    except preflight.PortlayerError as exc:
        assert "loss_fn" in str(exc)
    else:
        raise AssertionError("an output without a loss was accepted")


def test_fake_npu_plugin_dispatcher_reports_exactly_the_ops_left_out(tmp_path):
    exported = tmp_path / "npu-kernels.txt"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, __file__, str(exported)], capture_output=True, text=True,
                            env=env, cwd=tmp_path, timeout=HUNG_S)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout.splitlines()[-1])

    assert answer["source"]["kind"] == "dispatcher"
    assert set(answer["missing"]) == LEFT_OUT
    assert answer["exit_code"] == 1
    isin = answer["first"]["aten::isin.Tensor_Tensor"]
    assert (isin["phase"], isin["module"]) == ("forward", "mask")

    # The list exported there answers the same anywhere, and says where it came from.
    report = preflight.check(*tiny_step(), kernels=exported)
    assert report.source.kind == "exported list" and str(exported) in report.source.label
    assert {checked.use.op for checked in report.missing} == LEFT_OUT


def _run_as_fake_vendor(export_path: str) -> None:
    import types

    device_module = types.ModuleType("torch_npu_fake")  # registered like torch_npu, with no device to see
    device_module.is_available = lambda: False
    device_module.device_count = lambda: 0
    torch.utils.rename_privateuse1_backend("npu")
    torch._register_device_module("npu", device_module)

    def run_on_cpu(overload):
        def kernel(*args, **kwargs):
            move = lambda value: value.cpu() if isinstance(value, torch.Tensor) else value  # noqa: E731
            return overload(*map(move, args), **{key: move(value) for key, value in kwargs.items()})

        return kernel

    needed = [op for op in preflight.record_step(*tiny_step()).ops if not is_composite(op)]
    library = torch.library.Library("aten", "IMPL")
    for op in needed:
        if op not in LEFT_OUT:
            name, _, overload = op.removeprefix("aten::").partition(".")
            library.impl(op.removeprefix("aten::"), run_on_cpu(getattr(getattr(torch.ops.aten, name),
                                                                       overload or "default")), "PrivateUse1")
    report = preflight.check(*tiny_step(), target="npu")
    preflight.export_kernels("npu", export_path)
    print(json.dumps({
        "source": report.source.as_dict(),
        "missing": [checked.use.op for checked in report.missing],
        "first": {checked.use.op: checked.use.first.as_dict() for checked in report.missing},
        "exit_code": report.exit_code,
    }))


if __name__ == "__main__":
    _run_as_fake_vendor(sys.argv[1])
