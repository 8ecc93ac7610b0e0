"""One spelling of a command-line error everywhere: `portlayer: error: <one line>` (portlayer.errors)."""

from __future__ import annotations

import os
import subprocess
import sys

from portlayer.errors import error_line, print_error, write_line
from tests.processes import HUNG_S

ERROR = "portlayer: error: "


def test_error_line_folds_a_message_onto_one_line():
    assert error_line("cannot write\n  run.json:\tdisk full") == "portlayer: error: cannot write run.json: disk full"
    assert error_line("bad input", prog="extract_npu_ops") == "extract_npu_ops: error: bad input"


def run(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PORTLAYER_")}
    env["HF_HUB_OFFLINE"] = "1"
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=env, timeout=HUNG_S)


def test_a_trainer_rank_reports_in_the_same_spelling():
    result = run("portlayer.train", "--preset", "gpt2-tiny", "--resume")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == ERROR + "rank 0: --resume needs --checkpoint-dir"


def test_migrate_reports_a_report_it_cannot_write_in_the_same_spelling(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\nx = torch.ones(1).cuda()\n")
    (tmp_path / "a-file").write_text("")  # a file where the report's folder should be
    report = tmp_path / "a-file" / "r.json"
    result = run("portlayer", "migrate", "--diff", str(script), "--report", str(report))
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "cannot write the report" in line]
    assert len(errors) == 1 and errors[0].startswith(ERROR + f"{report}: cannot write")


class Recorded:
    """A stream that records each write."""

    def __init__(self):
        self.writes = []

    def write(self, text):
        self.writes.append(text)

    def flush(self):
        pass


def test_a_line_is_one_write_so_that_ranks_sharing_a_pipe_never_run_their_lines_together(monkeypatch):
    stream = Recorded()
    write_line("portlayer.train.step 14 6.83", stream)
    assert stream.writes == ["portlayer.train.step 14 6.83\n"]
    monkeypatch.setattr(sys, "stderr", stream)
    print_error("rank 1: injected fault: exiting at step 15")
    assert stream.writes[1:] == ["portlayer: error: rank 1: injected fault: exiting at step 15\n"]
