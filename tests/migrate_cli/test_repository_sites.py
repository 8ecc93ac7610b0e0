"""The whole-repository bench's site counter (bench/_cuda_sites.py): which lines are CUDA-specific sites,
and whether `migrate` converted, reported or left each in silence."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from portlayer.migrate.results import Diagnostic

from .helpers import write_tree

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their module's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


repositories = _load("migrate_repositories")
cuda_sites = sys.modules["_cuda_sites"]

TRAIN = '''"""Runs on torch.cuda devices: call .cuda() first."""
import torch


def step(model, x):
    # torch.cuda.synchronize() once was here
    torch.cuda.synchronize()
    torch.backends.cudnn.benchmark = True
    print("see torch.cuda's docs")
    return model
'''
LAUNCH = "#!/bin/bash\n# CUDA_VISIBLE_DEVICES comes from the scheduler\nexport CUDA_VISIBLE_DEVICES=0,1\npython train.py\n"


def verdicts(count) -> dict[str, int]:
    return {verdict: n for verdict, n in count.counts.items() if n}


def test_a_tree_on_neutral_has_a_converted_and_reported_sites_and_no_site_in_text(tmp_path):
    tree = write_tree(tmp_path, {"train.py": TRAIN, "launch.sh": LAUNCH})
    checked = repositories.check_tree(tree, "neutral", jobs=1)
    # train.py: synchronize() converted, the cudnn flag reported (PL302); the docstring, the comment and
    # the printed text are no sites. launch.sh: its export reported (PL604), its comment no site.
    assert verdicts(checked.sites) == {"converted": 1, "reported": 2}
    assert checked.sites.silent == []


def test_a_vendor_target_converts_what_neutral_reports(tmp_path):
    tree = write_tree(tmp_path, {"train.py": TRAIN, "launch.sh": LAUNCH})
    assert verdicts(repositories.check_tree(tree, "musa", jobs=1).sites) == {"converted": 3}


def test_a_site_nobody_touched_or_reported_is_silent_with_its_file_line_and_pattern(tmp_path):
    tree = write_tree(tmp_path, {"train.py": TRAIN})
    count = cuda_sites.count_sites(str(tree / "train.py"), "python", TRAIN, TRAIN, ())
    assert verdicts(count) == {"silent": 2}
    assert [(path, site.line, site.patterns) for path, site in count.silent] == [
        (str(tree / "train.py"), 7, ("torch.cuda",)), (str(tree / "train.py"), 8, ("cudnn",))]
    listed = repositories.silent_sites(tree, repositories.Checked(sites=count))
    assert listed[0] == {"file": "train.py", "line": 7, "patterns": ["torch.cuda"], "text": "torch.cuda.synchronize()"}


def test_a_diagnostic_covers_its_whole_statement_and_only_it():
    source = 'import torch\nx = torch.tensor(\n    1, device="cuda",\n)\ny = "cuda"\n'
    count = cuda_sites.count_sites("m.py", "python", source, source, [Diagnostic.of("PL405", 2, 5)])
    assert verdicts(count) == {"reported": 1, "silent": 1}
    assert count.silent[0][1].line == 5


def test_pl411_covers_the_if_chain_it_stands_on():
    source = ('import torch\nif hasattr(torch, "npu"):\n    d = "npu"\nelif torch.cuda.is_available():\n'
              '    d = "cuda"\nx = "cuda"\n')
    count = cuda_sites.count_sites("m.py", "python", source, source, [Diagnostic.of("PL411", 2, 1)])
    assert verdicts(count) == {"reported": 2, "silent": 1}


@pytest.mark.parametrize("source, patterns", [
    ('d = f"cuda:{rank}"\n', ("'cuda' device",)),
    ('os.environ["NCCL_DEBUG"] = "INFO"\n', ("CUDA/NCCL variable",)),
    ('subprocess.run("nvidia-smi -L", shell=True)\n', ("nvidia-smi",)),
    ("x = y.cuda(non_blocking=True).is_cuda\n", (".cuda()", ".is_cuda")),
    ("if backend == Backend.NCCL: pass\n", ("Backend.NCCL",)),
    ('"""torch.cuda in a docstring"""\n', ()),
    ('x = "cuda is fast"  # torch.cuda\n', ()),
    ("my_torch.cuda_thing = 1\n", ()),
    ('print("nvidia-smi-like tools")\n', ()),
    ("import torch.cuda\n", ()),  # imports on every build: its uses are the sites
    ("import torch.cuda as tc\n", ("torch.cuda",)),
])
def test_python_patterns(source, patterns):
    count = cuda_sites.count_sites("m.py", "python", source, source, ())
    assert tuple(p for _, site in count.silent for p in site.patterns) == patterns


def test_shell_comments_hold_no_site_but_a_hash_inside_a_word_does_not_open_one():
    source = "echo ${#NAMES[@]} $CUDA_VISIBLE_DEVICES\n# nvidia-smi\nnvidia-smi  # shows the GPUs\n"
    count = cuda_sites.count_sites("run.sh", "shell", source, source, ())
    assert [site.line for _, site in count.silent] == [1, 3]


def test_a_file_that_is_not_python_has_no_site():
    assert cuda_sites.count_sites("m.py", "python", "torch.cuda(\n", "torch.cuda(\n", ()).sites == 0
