"""`portlayer parity locate | dump | diff` (mounted by the parity group): output and exit codes."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from portlayer.train.locate.cli import diff, dump, locate
from tests.locate.models import one_thread  # noqa: F401 (a fixture)

CLEAN = "tests.locate.models:clean_gpt2"
FAULTY = "tests/locate/models.py:gpt2_with_wrong_eps"


def run(command, *args):
    return CliRunner().invoke(command, [str(a) for a in args])


def assert_one_line_error(result, fragment):
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and fragment in result.output
    assert "Traceback" not in result.output


def test_locate_on_a_preset_is_clean_and_says_what_ran_where():
    result = run(locate, "--preset", "gpt2-tiny", "--batch-size", 2, "--seq-len", 16)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("oracle: cpu cpu") and "float64" in lines[0]
    assert lines[1].startswith("device: cpu cpu") and "float32" in lines[1]
    assert lines[-1].startswith("no divergence")


def test_locate_names_the_module_and_exits_1():
    result = run(locate, "--model", FAULTY, "--quiet")
    assert result.exit_code == 1, result.output
    assert result.output.startswith("first divergence: transformer.h.1.ln_2 (LayerNorm)")


def test_locate_names_the_first_of_two_faulty_modules_to_run():
    result = run(locate, "--model", "tests/locate/models.py:gpt2_with_two_faults")
    assert result.exit_code == 1, result.output
    flagged = [line.split()[1] for line in result.output.splitlines() if line.rstrip().endswith("*")]
    assert flagged[-3:] == ["transformer.h.0", "transformer.h.1", "transformer.h.1.ln_2"]
    assert result.output.splitlines()[-1].startswith("first divergence: transformer.h.0.ln_1 (LayerNorm)")


@pytest.mark.parametrize(
    "tol, exit_code, verdict",
    [
        # the wrong eps costs the LayerNorm an own error of about 0.34
        ("1", 0, "no divergence: every module within 1.00e+00"),
        ("0.1", 1, "first divergence: transformer.h.1.ln_2 (LayerNorm): own error 3.4"),
    ],
)
def test_locate_tol_sets_the_tolerance(tol, exit_code, verdict):
    result = run(locate, "--model", FAULTY, "--quiet", "--tol", tol)
    assert result.exit_code == exit_code, result.output
    assert result.output.startswith(verdict)
    if exit_code:
        assert "> tolerance 1.00e-01 " in result.output


def test_locate_dtype_runs_the_device_side_in_it_with_its_tolerance():
    result = run(locate, "--model", CLEAN, "--dtype", "bfloat16")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("oracle: cpu cpu") and " float64, torch " in lines[0]
    assert lines[1].startswith("device: cpu cpu") and " bfloat16, torch " in lines[1]
    # sqrt(eps) of bfloat16: sqrt(2**-7) = 0.0884 (docs/parity-locate.md, "Tolerance")
    assert lines[-1] == "no divergence: every module within 8.84e-02"


def test_locate_dtype_must_be_a_floating_point_dtype():
    result = run(locate, "--model", CLEAN, "--dtype", "int8")
    assert result.exit_code == 2
    assert "not a floating-point dtype: 'int8'" in result.output


def test_dump_then_diff(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    result = run(dump, "--model", CLEAN, "-o", a)
    assert result.exit_code == 0 and result.output.startswith(f"wrote {a}:"), result.output
    assert run(dump, "--model", FAULTY, "-o", b, "--full").exit_code == 0
    assert (tmp_path / "b.json.pt").is_file()
    assert run(diff, a, a, "-q").output == "no divergence: every module within 3.45e-04\n"
    result = run(diff, a, b)
    assert result.exit_code == 1
    side_a, side_b = result.output.splitlines()[:2]
    assert re.fullmatch(r"A: cpu cpu \(.+\) float32, torch .+", side_a)
    assert re.fullmatch(r"B: cpu cpu \(.+\) float32, torch .+", side_b)
    assert result.output.splitlines()[-1].startswith("first divergence: transformer.h.1.ln_2 (LayerNorm)")


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--preset", "no-such-preset"], "unknown preset 'no-such-preset'"),
        (["--model", "tests.locate.models:nothing_here"], "has no 'nothing_here'"),
        (["--model", "no_such_file.py:make"], "no_such_file.py: no such file"),
        (["--preset", "gpt2-tiny", "--model", CLEAN], "exactly one of --preset and --model"),
    ],
)
def test_bad_model_sources_exit_2_with_one_line(args, fragment):
    assert_one_line_error(run(locate, *args), fragment)


def test_unreadable_or_mismatched_dumps_exit_2_with_one_line(tmp_path):
    a = tmp_path / "a.json"
    assert run(dump, "--model", CLEAN, "-o", a).exit_code == 0
    (tmp_path / "junk.json").write_bytes(b"\x00\xff not json")
    assert_one_line_error(run(diff, a, tmp_path / "junk.json"), "junk.json: not a readable JSON dump")
    assert_one_line_error(run(diff, tmp_path / "missing.json", a), "missing.json: no such file")
    other = json.loads(a.read_text())
    other["meta"]["model"] = "another-model"
    (tmp_path / "other.json").write_text(json.dumps(other))
    assert_one_line_error(run(diff, a, tmp_path / "other.json"), "dumps of different models")
    del other["calls"][3]["outputs"][0]["sample"]
    (tmp_path / "broken.json").write_text(json.dumps(other))
    assert_one_line_error(run(diff, a, tmp_path / "broken.json"), "broken.json: malformed dump")
