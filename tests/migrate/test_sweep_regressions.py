"""Internal errors found by running `portlayer migrate` over public training repositories, one test each:
the file must come out migrated (or untouched), parse, carry a diagnostic for what was left, and a second
run must change nothing — for every target."""

import ast

import pytest

from portlayer.migrate.engine import TARGETS, migrate_source


def migrated_twice(source: str, target: str):
    first = migrate_source(source, target)
    ast.parse(first.code)
    assert migrate_source(first.code, target).code == first.code
    return first


@pytest.mark.parametrize("target", TARGETS)
def test_an_assigned_is_cuda_is_left_and_reported(target):
    # torch_musa's storage.py patches torch: `torch.UntypedStorage.is_cuda = _is_musa`. Rewriting the
    # target into a comparison gave code that does not parse (an internal error for the whole file).
    source = (
        "import torch\n\n"
        "torch.UntypedStorage.is_cuda = _is_musa\n"
        "del storage.is_cuda\n"
        "on_gpu = tensor.is_cuda\n"
    )
    result = migrated_twice(source, target)
    lines = result.code.splitlines()
    assert "torch.UntypedStorage.is_cuda = _is_musa" in lines and "del storage.is_cuda" in lines
    assert "on_gpu = tensor.is_cuda" not in lines  # a read is still converted
    reported = [(d.code, d.line) for d in result.diagnostics if d.code == "PL401"]
    assert reported == [("PL401", 3), ("PL401", 4)]


@pytest.mark.parametrize("target", TARGETS)
def test_a_rewrite_inside_an_f_string_parses_on_the_python_floor(target):
    # NVIDIA/Megatron-LM@00caa53af30912914981c86f39db123961678bbd,
    # megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py:238 writes
    # f"{torch.device(f'cuda:{torch.cuda.current_device()}')}, " (the construct, not the file, is here). The
    # torch target's `torch.device("cpu")` put double quotes inside a double-quoted f-string: legal on
    # Python 3.12 only, an internal error on this 3.11 and the declared floor, 3.10.
    source = (
        "import torch\n"
        "def warn(device):\n"
        '    return (f"using {device} instead of "\n'
        "            f\"{torch.device(f'cuda:{torch.cuda.current_device()}')}, \"\n"
        "            f'or {torch.device(\"cuda\")}')\n"
    )
    result = migrated_twice(source, target)
    ast.parse(result.code, feature_version=(3, 10))
    assert "cuda" not in result.code
