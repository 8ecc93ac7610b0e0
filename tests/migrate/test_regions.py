"""`# portlayer: skip`, `# portlayer: off` / `on`, and `--annotate`."""

from portlayer.migrate.engine import migrate_source


def test_skip_excludes_its_statement_from_rewriting_and_reporting():
    source = (
        "import torch\n"
        "a = x.cuda()  # portlayer: skip\n"
        "b = y.cuda(\n"
        "    non_blocking=True,\n"
        ")  # portlayer: skip\n"
        "c = z.cuda()\n"
        "import apex  # portlayer: skip\n"
    )
    result = migrate_source(source)
    assert "a = x.cuda()  # portlayer: skip" in result.code
    assert "b = y.cuda(\n    non_blocking=True,\n)" in result.code
    assert "c = z.to(portlayer.device())" in result.code
    assert {c.line for c in result.changes} == {6} and result.diagnostics == ()


def test_off_on_excludes_a_region_and_off_without_on_runs_to_the_end():
    source = (
        "import torch\n"
        "# portlayer: off\n"
        "torch.cuda.synchronize()\n"
        "import apex\n"
        "# portlayer: on\n"
        "torch.cuda.synchronize()\n"
        "# portlayer: off\n"
        "torch.cuda.empty_cache()\n"
    )
    result = migrate_source(source, "npu")
    assert result.code.count("torch.cuda.synchronize()") == 1
    assert "torch.npu.synchronize()" in result.code and "torch.cuda.empty_cache()" in result.code
    assert result.diagnostics == ()


def test_directives_inside_strings_are_not_directives():
    result = migrate_source("import torch\nx = t.cuda(); s = '# portlayer: skip'\n")
    assert result.changes


def test_annotate_writes_one_comment_above_each_unconverted_statement_and_is_idempotent():
    source = (
        "import torch\n"
        "def f():\n"
        "    g = torch.cuda.CUDAGraph()  # capture\n"
        "    return g\n"
    )
    first = migrate_source(source, "neutral", annotate=True)
    assert first.code == (
        "import torch\n"
        "def f():\n"
        "    # portlayer: PL402 torch.cuda.CUDAGraph: CUDA graphs are CUDA-only\n"
        "    g = torch.cuda.CUDAGraph()  # capture\n"
        "    return g\n"
    )
    second = migrate_source(first.code, "neutral", annotate=True)
    assert second.code == first.code


def test_annotate_is_opt_in():
    source = "import apex\n"
    assert migrate_source(source).code == source
    assert migrate_source(source, annotate=True).code == "# portlayer: PL201 apex: apex is CUDA-only\nimport apex\n"


def test_annotate_on_a_compound_statement_header():
    source = "import torch\nwith torch.cuda.graph(g):\n    pass\n"
    result = migrate_source(source, annotate=True)
    assert result.code.startswith("import torch\n# portlayer: PL402 ")
