"""`portlayer parity band --runs …` and `parity compare --band`: what they print, write and exit with."""

import json

from click.testing import CliRunner

from portlayer.cli import cli


def invoke(*args):
    return CliRunner().invoke(cli, ["parity", *map(str, args)])


def csv(path, losses, grad_norms=None):
    rows = ["step,loss" + (",grad_norm" if grad_norms else "")]
    for index, loss in enumerate(losses):
        rows.append(f"{index + 1},{loss!r}" + (f",{grad_norms[index]!r}" if grad_norms else ""))
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_band_from_a_programs_own_runs_then_a_verdict_by_it(tmp_path):
    references = [
        csv(tmp_path / "ref1.csv", [7.0, 6.0, 5.0, 4.0], [2.0, 1.8, 1.6, 1.5]),
        csv(tmp_path / "ref2.csv", [7.0, 6.003, 5.002, 4.004], [2.0, 1.801, 1.6, 1.502]),
    ]
    made = invoke("band", "--runs", *references, "--out", tmp_path / "band.json")
    assert made.exit_code == 0, made.output
    assert made.output.splitlines()[0] == "band of 2 runs over 4 steps (x4 their spread):"
    assert made.output.strip().splitlines()[-1] == f"wrote {tmp_path / 'band.json'}"
    assert json.loads((tmp_path / "band.json").read_text())["schema"] == "portlayer.parity.band/1"

    port = csv(tmp_path / "port.csv", [7.0, 6.004, 4.998, 4.01], [2.0, 1.8, 1.601, 1.51])
    within = invoke("compare", references[0], port, "--band", tmp_path / "band.json")
    assert within.exit_code == 0, within.output
    assert within.output.strip().splitlines()[-1].startswith("within the band: 4 steps of loss, gradient norm;")

    wrong = csv(tmp_path / "wrong.csv", [7.0, 6.0, 5.2, 4.5], [2.0, 1.8, 1.6, 1.5])
    diverged = invoke("compare", references[0], wrong, "--band", tmp_path / "band.json", "--all-steps")
    assert diverged.exit_code == 1, diverged.output
    assert diverged.output.strip().splitlines()[-1].startswith("DIVERGED at step 3 of 4: the loss left the band")
    assert "<- left the band: loss" in diverged.output
    assert "industry criteria" in diverged.output


def test_compare_json_carries_the_band_and_the_criteria(tmp_path):
    references = [csv(tmp_path / "a.csv", [7.0, 6.0]), csv(tmp_path / "b.csv", [7.0, 6.01])]
    assert invoke("band", "--runs", *references, "--out", tmp_path / "band.json").exit_code == 0
    result = invoke("compare", *references, "--band", tmp_path / "band.json", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["band"]["within"] is True
    assert document["band"]["worst"]["loss"]["step"] == 2
    assert [criterion["name"].split(":")[0] for criterion in document["criteria"]] == ["Ascend"] * 3 + ["MindSpeed-LLM CI"]


def test_band_refusals_are_one_line(tmp_path):
    one = csv(tmp_path / "one.csv", [7.0, 6.0])
    for args, message in (
        (("band", "--runs", one, "--out", tmp_path / "band.json"), "two reference runs at least"),
        (("band", "--out", tmp_path / "band.json"), "give --preset P (trains perturbed runs) or --runs FILE FILE"),
        (("band", "--runs", one, tmp_path / "missing.csv", "--out", tmp_path / "b.json"), "no such file"),
        (("compare", one, one, "--band", tmp_path / "nothing.json"), "no such band file"),
    ):
        result = invoke(*args)
        assert result.exit_code == 2, result.output
        assert len(result.output.strip().splitlines()) == 1 and message in result.output, result.output
