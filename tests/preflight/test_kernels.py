"""Kernel sources: list files, the npu list extracted from the torch_npu wheel, and how ops are classified."""

import zipfile

import pytest

from portlayer.preflight import extract_npu_ops
from portlayer.preflight.kernels import KernelListError, KernelSource, classify, from_file, resolve

SAMPLE_YAML = """\
backend: NPU
cpp_namespace: at_npu::native
supported:
  - abs
  - add.Tensor
  - func: clone
    op_api: True
  - func: gelu.out(Tensor self, *, str approximate='none', Tensor(a!) out) -> Tensor(a!)
    impl_ns: op_api
custom:
  - func: npu_format_cast(Tensor self, int acl_format) -> Tensor
  - func: npu_gather_backward(Tensor grad, SymInt[] self_size, int dim, Tensor index) -> Tensor
symint:
  - func: npu_gather_backward(Tensor grad, SymInt[] self_size, int dim, Tensor index) -> Tensor
  - func: embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1) -> Tensor
autograd:
  - func: _thnn_fused_gru_cell(Tensor input_gates, Tensor hidden_gates, Tensor hx) -> (Tensor, Tensor)
"""
SAMPLE_OPS = {"aten::abs", "aten::add.Tensor", "aten::clone", "aten::gelu.out", "aten::embedding",
              "aten::_thnn_fused_gru_cell"}


def listed(*ops, target="npu"):
    return KernelSource(target, "list", "test list", set(ops).__contains__)


def test_yaml_sections_name_aten_ops_except_torch_npus_own():
    assert extract_npu_ops.ops_from_yaml([SAMPLE_YAML]) == SAMPLE_OPS


def test_wheel_extraction_writes_a_labelled_list(tmp_path):
    wheel = tmp_path / "torch_npu-9.1.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("torch_npu/csrc/aten/npu_native_functions.yaml", SAMPLE_YAML)
        archive.writestr("torch_npu/csrc/aten/other.yaml", "supported:\n  - not_an_npu_list\n")
    output = tmp_path / "npu-9.1.0.txt"

    assert extract_npu_ops.main([str(wheel), "-o", str(output)]) == 0

    source = from_file(output, "npu")
    assert (source.kind, source.label) == ("wheel yaml", "wheel yaml torch_npu 9.1.0")
    assert "--export-kernels" in source.caveat
    assert {op for op in SAMPLE_OPS if source.has_kernel(op)} == SAMPLE_OPS
    assert not source.has_kernel("aten::not_an_npu_list")


def test_extraction_rejects_unusable_input(tmp_path, capsys):
    yaml_file = tmp_path / "npu_native_functions.yaml"
    yaml_file.write_text(SAMPLE_YAML)
    assert extract_npu_ops.main([str(yaml_file)]) == 2  # no version to name the list with
    assert extract_npu_ops.main([str(tmp_path / "missing.whl")]) == 2
    assert capsys.readouterr().err.count("extract_npu_ops: error:") == 2


def test_user_lists_accept_bare_names_and_reject_junk(tmp_path):
    plain = tmp_path / "musa.txt"
    plain.write_text("# my musa kernels\nadd.Tensor\naten::mm\n\n")
    source = from_file(plain, "musa")
    assert (source.kind, source.label) == ("list", f"list {plain}")
    assert source.has_kernel("aten::add.Tensor") and source.has_kernel("aten::mm")

    junk = tmp_path / "junk.txt"
    junk.write_text("aten::mm\nthis is not an op\n")
    with pytest.raises(KernelListError, match=r"junk.txt:2: not an op name"):
        from_file(junk, "musa")
    npu_list = tmp_path / "npu.txt"
    npu_list.write_text("# portlayer kernel list\n# target: npu\naten::mm\n")
    with pytest.raises(KernelListError, match="lists kernels for npu, not musa"):
        from_file(npu_list, "musa")
    with pytest.raises(KernelListError, match="cannot read kernel list"):
        from_file(tmp_path / "absent.txt", "npu")


def test_without_the_plugin_npu_falls_back_to_the_committed_wheel_list_and_musa_needs_one():
    source = resolve("npu")
    assert source.kind == "wheel yaml" and source.label.startswith("wheel yaml torch_npu ")
    assert source.has_kernel("aten::mm") and not source.has_kernel("aten::gelu")  # yaml lists gelu.out only
    with pytest.raises(KernelListError, match="no kernel list for musa"):
        resolve("musa")
    with pytest.raises(KernelListError, match="unknown target"):
        resolve("cuda")


def test_composite_ops_run_everywhere_and_structured_ops_need_their_out_kernel():
    assert classify("aten::expand", listed()) == "composite"
    assert classify("aten::gelu", listed("aten::gelu.out")) == "native"
    assert classify("aten::add_.Tensor", listed("aten::add.out")) == "native"
    assert classify("aten::gelu", listed("aten::gelu_backward")) == "missing"
    assert classify("aten::isin.Tensor_Tensor", listed("aten::isin.Tensor_Tensor")) == "native"
