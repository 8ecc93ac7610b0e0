"""The shared findings formatter (migrate and preflight print through it)."""

import json

import pytest

from portlayer.findings import FORMATS, Finding, render

FINDINGS = [
    Finding("src/a.py", 3, 5, "PL302", "warning", "cudnn flag", "drop it", "cudnn flag kept"),
    Finding("src/a.py", 4, 1, "PL102", "change", "torch.cuda.x -> portlayer.x"),
]


def test_text_is_path_line_col_code_message_then_the_hint():
    assert render("text", FINDINGS) == (
        "src/a.py:3:5: PL302 cudnn flag\n  hint: drop it\nsrc/a.py:4:1: PL102 torch.cuda.x -> portlayer.x\n"
    )


def test_an_empty_run_is_a_valid_document_in_every_format():
    assert render("text", []) == render("github", []) == ""
    assert json.loads(render("json", [])) == []
    assert render("csv", []).count("\n") == 1  # the header
    assert json.loads(render("sarif", []))["runs"][0]["results"] == []


def test_an_unknown_format_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match="expected one of " + ", ".join(FORMATS)):
        render("xml", FINDINGS)
