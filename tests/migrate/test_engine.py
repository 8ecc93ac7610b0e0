"""The engine's contract: a pure function over source text, with clear errors for bad input."""

import pytest

from portlayer.migrate.engine import TARGETS, may_change, migrate_source
from portlayer.migrate.results import Diagnostic, SourceError


def test_targets_are_the_four_of_the_contract():
    assert TARGETS == ("neutral", "torch", "npu", "musa")


def test_unknown_target_is_a_value_error():
    with pytest.raises(ValueError, match="unknown target 'rocm'"):
        migrate_source("import torch\n", "rocm")


@pytest.mark.parametrize("source", ["x = torch.cuda.synchronize(\n", "def f(:\n    torch.cuda\n", "x = 'cuda\n"])
def test_unparseable_input_is_a_source_error_with_a_position(source):
    with pytest.raises(SourceError) as raised:
        migrate_source(source)
    assert raised.value.line >= 1 and raised.value.message


def test_a_syntax_error_says_which_python_grammar_judged_it():
    # Code for a newer Python than the one running portlayer is rejected, not half-migrated.
    with pytest.raises(SourceError, match=r"\(as Python 3\.\d+ parses it\)"):
        migrate_source("import torch\nx = torch.cuda.synchronize(\n")


def test_a_module_without_cuda_comes_out_byte_identical_even_with_odd_formatting():
    source = "import torch\r\n\r\nx  =  torch.zeros( 3 )\t# tab\r\n"
    result = migrate_source(source)
    assert result.code == source and not result.changed and result.diagnostics == ()


def test_crlf_line_endings_survive_a_rewrite():
    result = migrate_source("import torch\r\ntorch.cuda.synchronize()\r\nx = torch.ones(1)\r\n")
    assert result.code == "import portlayer\r\nimport torch\r\nportlayer.synchronize()\r\nx = torch.ones(1)\r\n"


def test_imports_the_rewrite_left_unused_are_dropped_others_kept():
    source = "import os\nimport torch\nfrom torch.cuda import synchronize\nsynchronize()\n"
    # `import torch` was unused before the rewrite too: not the rewrite's to drop.
    assert migrate_source(source).code == "import os\nimport portlayer\nimport torch\nportlayer.synchronize()\n"


def test_prefilter_sees_every_kind_of_trigger():
    for source in ["x.cuda()", "'NCCL_DEBUG'", "import apex", "from flash_attn import f", "import triton.language",
                   "backend='nccl'", "torch.backends.cudnn.benchmark", "import pynvml", "torch.amp.GradScaler()",
                   "from torch.utils import cpp_extension", "attn_implementation='flash_attention_2'"]:
        assert may_change(source), source
    assert not may_change("import torch\nx = torch.zeros(3).to('cpu')\n")


def test_prefilter_ignores_words_that_only_contain_a_trigger():
    # "amp" in "example" and "clamp", "apex" in "apexes", "Tensor" anywhere: nothing a rule fires on.
    assert not may_change("def example(x: torch.Tensor):\n    return x.clamp(0).double()  # apexes\n")


def test_words_common_outside_cuda_code_do_not_send_a_file_through_the_rules():
    # A quarter of transformers' files say `rank`, and model names say `nvidia/…`: reading each of them
    # through the rules made the neutral target twice as slow as the vendors' (bench/migrate_tree.py).
    for source in ["model.to(local_rank)\n", "def f(rank, gpu):\n    return rank\n",
                   'CHECKPOINT = "nvidia/mit-b0"\n', "# needs grouped_gemm\nx = 1\n",
                   # Every HuggingFace model file says whether it supports flash-attn, and the trainer
                   # whether DeepSpeed is on: neither calls either library.
                   "class Model:\n    _supports_flash_attn = True\n",
                   "if is_deepspeed_zero3_enabled():\n    import_deepspeed_config(deepspeed)\n"]:
        assert not may_change(source, "neutral") and not may_change(source, "torch"), source
    for source in ["import nvidia.dali\n", "from grouped_gemm import ops\n", "import os, apex\n",
                   "from flash_attn import flash_attn_func\n", "    import deepspeed\n",
                   "import xformers.ops as xops\n",
                   "try:\n    import triton\nexcept ImportError:\n    pass\n"]:
        assert may_change(source), source


def test_an_int_index_is_still_converted_in_a_file_with_cuda_code():
    source = "import torch\ntorch.cuda.set_device(0)\ndef f(model, local_rank: int):\n    return model.to(local_rank)\n"
    assert "model.to(portlayer.device(local_rank))" in migrate_source(source).code


def test_float64_is_looked_for_only_where_it_is_reported():
    for source in ["torch.float64", "x.double()", "torch.double"]:
        assert may_change(source, "npu") and may_change(source, "musa"), source
        assert not may_change(source, "neutral") and not may_change(source, "torch"), source


@pytest.mark.parametrize("target", ["neutral", "torch"])
def test_float64_is_noted_once_per_file_on_the_targets_that_run_anywhere(target):
    # Neutral output is meant to run on the npu too, where float64 is emulated or missing.
    source = "import torch\nx = torch.zeros(2).cuda()\ny = x.double()\nz = torch.ones(2, dtype=torch.float64)\n"
    (note,) = migrate_source(source, target).diagnostics
    assert (note.code, note.line, note.severity) == ("PL502", 3, "info")
    assert all(backend in note.message for backend in ("npu", "musa", "hpu"))


def test_result_reports_conversions_with_input_positions():
    result = migrate_source("import torch\n\nx = y.cuda()\n")
    assert result.changed
    assert [(c.code, c.line, c.col) for c in result.changes] == [("PL101", 3, 5), ("PL110", 3, 5)]


def test_diagnostic_formats_as_path_line_col_code_message_and_has_a_category():
    (diagnostic,) = migrate_source("import apex\n").diagnostics
    assert isinstance(diagnostic, Diagnostic)
    assert diagnostic.format("train.py") == "train.py:1:8: PL201 apex: apex is CUDA-only"
    assert diagnostic.category == "library" and diagnostic.severity == "warning" and diagnostic.hint


def test_shadowed_names_are_not_torch():
    source = (
        "import torch\n"
        "def run(cuda, device):\n"
        "    cuda.synchronize()\n"
        "    torch = load()\n"
        "    torch.cuda.synchronize()\n"
    )
    result = migrate_source(source)
    assert result.code == source and result.changes == ()


def test_user_identifiers_comments_and_messages_are_left_alone():
    source = (
        "import torch\n"
        "# call torch.cuda.synchronize() first\n"
        "if args.cuda and not args.no_cuda:\n"
        "    print('cuda failed on', self.cuda_device, cuda_graph_impl)\n"
        "from megatron.core import cuda_graph_config\n"
    )
    assert migrate_source(source, "musa").code == source


def test_nested_attribute_chains_convert_inside_out():
    source = "import torch\nname = torch.cuda.get_device_properties(torch.cuda.current_device()).name\n"
    assert migrate_source(source, "npu").code == (
        "import torch\nimport torch_npu\n"
        "name = torch.npu.get_device_properties(torch.npu.current_device()).name\n"
    )


def test_vendor_import_is_added_once_and_only_to_changed_files():
    first = migrate_source("import torch\nx = t.cuda()\ny = u.cuda()\n", "npu").code
    assert first.count("import torch_npu") == 1
    assert migrate_source(first + "z = v.cuda()\n", "npu").code.count("import torch_npu") == 1
    assert "torch_npu" not in migrate_source("import apex\n", "npu").code


def test_environment_renames_need_no_vendor_import():
    result = migrate_source("import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n", "npu")
    assert result.code == "import os\nos.environ['ASCEND_RT_VISIBLE_DEVICES'] = '0'\n"


@pytest.mark.parametrize("source", [
    '"""Runs on CUDA: call torch.cuda.synchronize() first."""\nimport torch\n# x.cuda()\n',
    'def f():\n    """Moves to "cuda"."""\n    # NCCL_DEBUG=INFO helps\n    return 1\n',
])
def test_cuda_only_in_comments_and_docstrings_is_left_alone(source):
    result = migrate_source(source, "npu")
    assert (result.code, result.changes, result.diagnostics) == (source, (), ())


@pytest.mark.parametrize(("source", "code", "changes", "diagnostics"), [
    # an f-string statement's expressions are code: converted, and the now unused `import torch` goes
    ('import torch\nf"{torch.cuda.synchronize()}"\n', 'import portlayer\nf"{portlayer.synchronize()}"\n',
     [("PL102", 2, 4), ("PL110", 2, 4)], []),
    # two strings, not a docstring: each is a literal the rules look at (a device string used as no device)
    ('import torch\n"cuda:0" ""\n', None, [], [("PL405", 2, 1)]),
    ('import torch\nx = "cuda"  \\\n  # comment\n', None, [], [("PL405", 2, 5)]),
])
def test_strings_and_expressions_that_look_like_prose_are_still_migrated(source, code, changes, diagnostics):
    from portlayer.migrate.engine import run_rules
    from portlayer.migrate.targets import target_named

    for target in TARGETS:
        assert run_rules(source, target_named(target)) == run_rules(source, target_named(target), every_rule=True)
    result = migrate_source(source)
    assert result.code == (source if code is None else code)
    assert [(c.code, c.line, c.col) for c in result.changes] == changes
    assert [(d.code, d.line, d.col) for d in result.diagnostics] == diagnostics


# The torch target falls back to the cpu where there is no accelerator (docs/migrate.md, "Meaning").
_ACCELERATOR = 'torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")'


def _indexed(index: int) -> str:
    return (f"(torch.device(torch.accelerator.current_accelerator().type, {index}) "
            'if torch.accelerator.is_available() else torch.device("cpu"))')


@pytest.mark.parametrize(("source", "neutral", "torch_target"), [
    ('import torch\nd = torch.device("cuda:1")\n', 'import portlayer\nd = portlayer.device(1)\n',
     f"import torch\nd = {_indexed(1)}\n"),
    # the added import joins the torch import block, sorted (ruff I001)
    ('import torch\nx = torch.zeros(2, device="cuda:3")\n',
     'import portlayer\nimport torch\nx = torch.zeros(2, device=portlayer.device(3))\n',
     f"import torch\nx = torch.zeros(2, device={_indexed(3)})\n"),
    # "cpu" stays as written; only "cuda" names the accelerator
    ('import torch\nx = torch.zeros(2, device="cpu")\ny = torch.zeros(2, device="cuda")\n',
     'import portlayer\nimport torch\nx = torch.zeros(2, device="cpu")\ny = torch.zeros(2, device=portlayer.device_type())\n',
     f'import torch\nDEVICE_TYPE = ({_ACCELERATOR}).type\nx = torch.zeros(2, device="cpu")\n'
     'y = torch.zeros(2, device=DEVICE_TYPE)\n'),
    ('import torch\nd = torch.device("cpu")\ne = torch.device("cuda")\n',
     'import portlayer\nimport torch\nd = torch.device("cpu")\ne = portlayer.device()\n',
     f'import torch\nd = torch.device("cpu")\ne = {_ACCELERATOR}\n'),
])
def test_device_strings_with_an_index_keep_it_and_cpu_stays(source, neutral, torch_target):
    assert migrate_source(source, "neutral").code == neutral
    assert migrate_source(source, "torch").code == torch_target


def test_the_device_type_is_defined_below_an_import_of_torch_among_other_modules():
    # `import os, torch` binds torch too: the definition goes below it (it once failed as an internal error).
    source = 'import os, torch\nx = torch.zeros(2, device="cuda")\n'
    assert migrate_source(source, "torch").code == (
        f'import os, torch\nDEVICE_TYPE = ({_ACCELERATOR}).type\nx = torch.zeros(2, device=DEVICE_TYPE)\n')


def test_only_torch_cudas_nccl_is_reported_as_nccl_only():
    assert [(d.code, d.line, d.col) for d in migrate_source("from torch.cuda import nccl\n").diagnostics] == [
        ("PL410", 1, 1)
    ]
    assert migrate_source("from mylib import nccl\n").diagnostics == ()


def test_an_item_of_an_index_list_not_provably_ints_is_reported():
    source = "import torch\ntorch.cuda.synchronize()\nx = torch.ones(1).to(args.gpus[1])\n"
    assert [(d.code, d.line, d.col) for d in migrate_source(source).diagnostics] == [("PL412", 3, 22)]


# A rule that rewrites one line into several (flash-attn's call into SDPA's) runs before the CUDA rules.
_AFTER_A_LONGER_REWRITE = """\
from flash_attn import flash_attn_func
import torch

def attend(q, k, v):
    return flash_attn_func(q, k, v, causal=True)

x = torch.zeros(2).cuda()
torch.cuda.synchronize()  # portlayer: skip
"""


def test_positions_after_a_rewrite_that_adds_lines_are_the_files():
    result = migrate_source(_AFTER_A_LONGER_REWRITE)
    assert result.code.count("\n") > _AFTER_A_LONGER_REWRITE.count("\n")
    assert [(c.code, c.line, c.col) for c in result.changes] == [("PL130", 5, 12), ("PL110", 5, 12), ("PL101", 7, 5)]


def test_an_excluded_line_after_a_rewrite_that_adds_lines_stays_excluded():
    code = migrate_source(_AFTER_A_LONGER_REWRITE).code
    assert code.endswith("torch.cuda.synchronize()  # portlayer: skip\n")
