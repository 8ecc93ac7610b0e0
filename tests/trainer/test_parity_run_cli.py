"""`portlayer parity run` as a user meets it: checks before training, the bar on a terminal, Ctrl-C, multi-node.

Each training test is one short gloo job (gpt2-tiny, 2 ranks or 2 single-rank nodes).
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from portlayer.train import runfile
from portlayer.train.parity_run import torchrun_command
from portlayer.train.process_group import process_tree
from portlayer.train.progress import StepBar, parse_step_event, step_event
from tests.trainer.helpers import RTOL, baseline, free_port, max_relative_difference

PORTLAYER = [sys.executable, "-m", "portlayer"]


def portlayer(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*PORTLAYER, *map(str, args)], capture_output=True, text=True, timeout=300, **kwargs
    )


def assert_one_line_error(result, status: int, text: str) -> None:
    assert result.returncode == status, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("portlayer: error: ") and text in result.stderr, result.stderr


def test_a_misspelt_trainer_option_is_one_line_and_exit_2_before_training(tmp_path):
    started = time.perf_counter()
    result = portlayer(
        "parity", "run", "--preset", "gpt2-tiny", "--out", tmp_path / "run.json", "--grad-acum", 2
    )
    assert_one_line_error(result, 2, "No such option '--grad-acum'")
    assert "Usage:" not in result.stdout + result.stderr
    assert time.perf_counter() - started < 20  # refused by parsing, not after a torchrun start-up


@pytest.mark.parametrize(
    ("out", "text"),
    [
        ("missing/run.json", "no such directory"),
        ("a-file/run.json", "no such directory"),
        (".", "is a directory"),
    ],
)
def test_an_unwritable_out_is_refused_before_training(tmp_path, out, text):
    (tmp_path / "a-file").write_text("not a folder")
    result = portlayer("parity", "run", "--preset", "gpt2-tiny", "--steps", 2, "--out", tmp_path / out)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and text in result.stderr, result.stderr
    assert result.stdout == ""  # no trainer output: it never started


def test_nnodes_above_one_needs_a_rendezvous(tmp_path):
    result = portlayer("parity", "run", "--preset", "gpt2-tiny", "--out", tmp_path / "r.json", "--nnodes", 2)
    assert_one_line_error(result, 2, "--nnodes 2 needs --rdzv-endpoint")


def test_multi_node_options_reach_torchrun_instead_of_standalone():
    nodes = {
        "nnodes": "2",
        "node_rank": 1,
        "rdzv_backend": "c10d",
        "rdzv_endpoint": "host0:29400",
        "rdzv_id": "j7",
    }
    command = torchrun_command("gpt2-tiny", 4, 30, Path("run.json"), (), nodes)
    launcher = command[: command.index("-m", 2)]
    assert launcher[1:] == [
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=4",
        "--nnodes=2",
        "--node-rank=1",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=host0:29400",
        "--rdzv-id=j7",
    ]
    assert "--standalone" in torchrun_command("gpt2-tiny", 4, 30, Path("run.json"), ())


def test_on_a_pipe_the_trainer_lines_pass_and_step_events_stay_hidden():
    stream, echoed = io.StringIO(), []
    bar = StepBar(30, "gpt2-tiny", stream)
    for line in (step_event(1, 10.8), "step 10/30  loss 7.1", step_event(2, 10.1)):
        bar.line(line, echoed.append)
    bar.close()
    assert echoed == ["step 10/30  loss 7.1"]
    assert stream.getvalue() == ""




def test_two_single_rank_nodes_reproduce_the_two_rank_baseline(tmp_path):
    """Two `parity run` processes joined through the c10d rendezvous are one 2-rank job: the same losses."""
    endpoint = f"127.0.0.1:{free_port()}"
    nodes = [
        subprocess.Popen(
            [
                *PORTLAYER,
                *[
                    "parity",
                    "run",
                    "--preset",
                    "gpt2-tiny",
                    "--nproc",
                    "1",
                    "--steps",
                    "30",
                    "--nnodes",
                    "2",
                    "--rdzv-backend",
                    "c10d",
                ],
                *("--node-rank", str(rank), "--rdzv-endpoint", endpoint, "--rdzv-id", "test"),
                *("--out", str(tmp_path / f"node{rank}.json"), "--quiet"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in (0, 1)
    ]
    outputs = [node.communicate(timeout=300)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], outputs
    written = [path.name for path in tmp_path.iterdir()]
    assert len(written) == 1, written  # global rank 0 writes the run file, on whichever node it ran
    run = runfile.read_run(tmp_path / written[0])
    assert run["metadata"]["world_size"] == 2
    assert max_relative_difference(baseline("gpt2-tiny"), run) < RTOL


def _alive(pids: list[int]) -> list[int]:
    def running(pid: int) -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state != "Z"

    return [pid for pid in pids if running(pid)]


def _read_until(fd: int, seen: bytearray, needle: bytes, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while needle not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
    return needle in seen


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_on_a_terminal_a_bar_shows_at_once_and_ctrl_c_exits_130_leaving_no_process(tmp_path):
    master, slave = pty.openpty()
    # A terminal 100 columns wide (a fresh pty is 0 x 0, where tqdm draws nothing).
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    process = subprocess.Popen(
        [
            *PORTLAYER,
            *["parity", "run", "--preset", "gpt2-tiny", "--nproc", "2", "--steps", "400", "--out"],
            str(tmp_path / "r.json"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=slave,
        text=True,
    )
    os.close(slave)
    seen = bytearray()
    try:
        # The bar is up before torchrun has started a rank (the trainer's first line comes seconds later).
        assert _read_until(master, seen, b"gpt2-tiny (starting)", 5), bytes(seen)
        assert b"0/400" in seen
        # Then it counts steps.
        assert _read_until(master, seen, b"2/400", 120), bytes(seen)
        started = process_tree(process.pid)
        assert len(_alive(started)) >= 3  # torchrun and its two ranks
        process.send_signal(signal.SIGINT)
        status = process.wait(timeout=30)
        _read_until(master, seen, b"\n\x00", 1)  # drain what is left
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
    assert status == 130
    last = bytes(seen).decode().replace("\r", "\n").strip().splitlines()[-1]
    assert last == "portlayer: error: interrupted: stopped the parity run of gpt2-tiny and its ranks"
    assert _alive(started) == []
    assert not (tmp_path / "r.json").exists()


def test_a_step_event_is_read_back_and_a_line_another_rank_wrote_into_is_not_one():
    assert parse_step_event(step_event(3, 10.25)) == (3, 10.25)
    assert parse_step_event("portlayer.train.step 3 10.25") == (3, 10.25)
    # the ranks share one pipe: rank 1's output on the same line leaves an ordinary line, echoed as it came
    assert parse_step_event("portlayer.train.step 3 10.25[W1123 rank 1] warning") is None
    assert parse_step_event("portlayer.train.step 3 10.25 model on musa") is None
    assert parse_step_event("[rank 0] loss 10.25") is None
