"""Preflight's targets and their facts come from the backend records: every backend with a vendor plugin, the
dispatch key its kernels live under, the dtypes it lacks."""

import dataclasses

import pytest
import torch
from click.testing import CliRunner

from portlayer import preflight
from portlayer.backends import BY_NAME
from portlayer.cli import cli
from portlayer.preflight.kernels import (
    PLUGIN_BACKENDS,
    KernelListError,
    KernelSource,
    from_dispatcher,
    resolve,
)


def test_every_backend_with_a_vendor_plugin_is_a_target_in_probe_order():
    assert PLUGIN_BACKENDS == ("npu", "musa", "mlu", "hpu", "sdaa", "supa")


def test_a_target_without_its_plugin_or_a_list_says_what_to_install_even_for_a_dotted_plugin():
    with pytest.raises(KernelListError) as error:
        resolve("hpu")
    assert str(error.value) == (
        "no kernel list for hpu here: run where habana_frameworks.torch is installed, or pass --kernels FILE "
        "(a list exported there with --export-kernels, or one op name a line)"
    )


def test_the_dispatcher_is_asked_under_the_records_dispatch_key(monkeypatch):
    # Gaudi's kernels live under torch's own HPU key, empty in a cpu build; with the record pointing at the CPU
    # key instead, the same question finds the cpu kernel.
    assert not from_dispatcher("hpu").has_kernel("aten::mm")
    monkeypatch.setitem(BY_NAME, "hpu", dataclasses.replace(BY_NAME["hpu"], dispatch_key="CPU"))
    assert from_dispatcher("hpu").has_kernel("aten::mm")


def test_complex64_is_a_risk_on_gaudi_and_not_on_ascend():
    def report_for(target):
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        everything = KernelSource(target, "list", "test list", lambda op: True)
        return preflight.check(model, torch.ones(2, 3), optimizer, kernels=everything,
                               loss_fn=lambda out: (out.sum().to(torch.complex64) * 2).abs())

    gaudi = report_for("hpu")
    assert {risk.dtype for risk in gaudi.dtype_risks} == {"complex64"}
    assert {risk.why for risk in gaudi.dtype_risks} == {
        "Gaudi's PyTorch support matrix lists Float64 and Complex64 as unsupported"
    }
    assert gaudi.exit_code == 1
    assert report_for("npu").dtype_risks == []


@pytest.mark.parametrize(
    ("target", "exit_code", "message"),
    [
        # A record with a plugin is a target; without its kernel list the ops are reported unchecked.
        ("sdaa", 0, "not checked: no kernel list for sdaa here: run where torch_sdaa is installed"),
        ("cuda", 2, "Invalid value for '--target'"),
    ],
)
def test_the_cli_offers_the_targets_of_the_records(target, exit_code, message):
    result = CliRunner().invoke(cli, ["preflight", "--preset", "gpt2-tiny", "--target", target])
    assert result.exit_code == exit_code
    assert message in result.output
