"""`portlayer parity run` as a user meets it: checks before training, the bar on a terminal, Ctrl-C, multi-node.

Each training test is one short gloo job (gpt2-tiny, 2 ranks or 2 single-rank nodes).
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from portlayer.cli import main
from portlayer.train import parity_run, runfile
from portlayer.train.parity_run import STOP_GRACE_S, torchrun_command
from portlayer.train.process_group import ProcessGroup, process_tree
from portlayer.train.progress import StepBar, parse_step_event, step_event
from tests.processes import HUNG_S
from tests.trainer.helpers import RTOL, baseline, free_port, max_relative_difference

# Gloo jobs on the cpu, held to the cpu baselines: the devices are hidden from the ranks (tests/accelerator.py). On a
# GPU host the ranks would otherwise take nccl: rank 1 asking for a cuda:1 a one-GPU host does not have, or
# two single-rank nodes sharing its one GPU (which NCCL refuses).
pytestmark = pytest.mark.usefixtures("without_accelerators")

PORTLAYER = [sys.executable, "-m", "portlayer"]


def portlayer(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*PORTLAYER, *map(str, args)], capture_output=True, text=True, timeout=HUNG_S, **kwargs
    )


def assert_one_line_error(result, status: int, text: str) -> None:
    assert result.returncode == status, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("portlayer: error: ") and text in result.stderr, result.stderr


def test_a_misspelt_trainer_option_is_one_line_and_exit_2_before_training(tmp_path, monkeypatch, capsys):
    def launch(*args):
        raise AssertionError("torchrun started")

    monkeypatch.setattr(parity_run, "launch", launch)  # refused by parsing, before any torchrun starts
    with pytest.raises(SystemExit) as exit:
        main(["parity", "run", "--preset", "gpt2-tiny", "--out", str(tmp_path / "run.json"), "--grad-acum", "2"])
    result = capsys.readouterr()
    assert exit.value.code == 2
    assert result.err.count("\n") == 1, result.err
    assert result.err.startswith("portlayer: error: No such option '--grad-acum'"), result.err
    assert "Usage:" not in result.out


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
    launcher = command[: command.index("--")]
    assert launcher[1:] == [
        "-m",
        "portlayer.train.launch",
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


def launched(output: list[str]) -> tuple[int, str | None, list[str]]:
    """`launch` over a command that prints `output` and exits 1: (status, the error it names, the lines shown)."""
    script = f"import sys; print({chr(10).join(output)!r}); sys.exit(1)"
    shown = []
    status, error = parity_run.launch([sys.executable, "-c", script], dict(os.environ), shown.append)
    return status, error, shown


def test_the_rank_that_died_is_named_though_a_peer_reports_the_broken_collective_first():
    # What a kill at step 15 can look like on the shared pipe: rank 0's reset connection ahead of rank 1's line,
    # and rank 1's line glued to the end of another rank's unfinished one.
    lines = [
        "step 10/30  loss 7.1",
        "portlayer: error: rank 0: RuntimeError: [pair.cc:537] Read error: Connection reset by peer",
        "W1127 17:20:01.000000 4321 torch/distributed/elastic/multiprocessing/api.py:900] Sending SIGTERM",
        "step 14/30 portlayer: error: rank 1: injected fault: exiting at step 15",
    ]
    assert launched(lines) == (1, "rank 1: injected fault: exiting at step 15", ["step 10/30  loss 7.1", "step 14/30 "])


def test_a_rank_killed_by_a_signal_is_named_from_torchruns_report():
    # The OOM killer's SIGKILL leaves the killed rank no chance to say so; its peer's broken collective is all the
    # ranks print, and torchrun's report (filtered from the output) says who died and how.
    report = [
        "portlayer: error: rank 0: RuntimeError: [pair.cc:589] Connection closed by peer [127.0.0.1]:4021",
        "Traceback (most recent call last):",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "============================================================",
        "Root Cause (first observed failure):",
        "[0]:",
        "  rank      : 1 (local_rank: 1)",
        "  exitcode  : -9 (pid: 4022) (SIGKILL)",
        "  traceback : Signal 9 (SIGKILL) received by PID 4022",
    ]
    assert launched(report) == (1, "rank 1: killed by SIGKILL (signal 9)", [])


def test_when_every_error_is_a_broken_collective_the_first_is_named():
    errors = ["rank 1: RuntimeError: Connection closed by peer", "rank 0: RuntimeError: Broken pipe"]
    assert parity_run.root_cause(errors) == errors[0]
    assert parity_run.root_cause([]) is None


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
    outputs = [node.communicate(timeout=HUNG_S)[0] for node in nodes]
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
    """Read the terminal until `needle` (a regular expression) shows, or `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while not re.search(needle, seen) and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
    return re.search(needle, seen) is not None


@contextlib.contextmanager
def training_on_a_terminal(tmp_path: Path, env: dict | None = None):
    """`portlayer parity run` of 400 steps, its stderr a terminal 100 columns wide (a fresh pty is 0 x 0, where
    tqdm draws nothing); yields (the process, the terminal's end, what it has shown so far). Whatever is left
    is killed after the block."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    command = [*PORTLAYER, "parity", "run", "--preset", "gpt2-tiny", "--nproc", "2", "--steps", "400"]
    try:
        with ProcessGroup(
            [*command, "--out", str(tmp_path / "r.json")], stdout=subprocess.DEVNULL, stderr=slave, env=env
        ) as group:
            os.close(slave)
            yield group.process, master, bytearray()
    finally:
        os.close(master)


COUNTED_PAST_1 = rb"\b([2-9]|[1-9]\d+)/400"  # the bar at step 2 or later


def _training(process, master: int, seen: bytearray) -> list[int]:
    """Wait for the bar to count past step 1; the processes the run has started by then (torchrun and its ranks).
    (tqdm redraws at most every 0.1 s: fast steps may show 1/400, then 3/400.)"""
    assert _read_until(master, seen, COUNTED_PAST_1, HUNG_S), bytes(seen)
    started = process_tree(process.pid)
    assert len(_alive(started)) >= 3  # torchrun and its two ranks
    return started


def _exit_status(process, master: int, seen: bytearray, timeout: float) -> int:
    """Wait for `process` to exit while reading the terminal, as a real one is read: a terminal nobody reads fills
    up, and the run's last writes to it (its bar, the error line) then block it."""
    deadline = time.monotonic() + timeout
    while process.poll() is None:
        if time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(process.args, timeout)
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            with contextlib.suppress(OSError):  # the run closed its end
                seen += os.read(master, 65536)
    return process.returncode


def _last_line(master: int, seen: bytearray) -> str:
    _read_until(master, seen, b"\n\x00", 1)  # drain what is left
    return bytes(seen).decode().replace("\r", "\n").strip().splitlines()[-1]


INTERRUPTED = "portlayer: error: interrupted: stopped the parity run of gpt2-tiny and its ranks"
# The promises (docs/parity.md "Stopping a run"): the first Ctrl-C ends the run and every process it started
# within STOP_GRACE_S + 5 s, a second within 5 s ("at once": the time a loaded machine takes to exit).
STOPPED_WITHIN_S = STOP_GRACE_S + 5
KILLED_WITHIN_S = 5


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_on_a_terminal_a_bar_shows_at_once_and_ctrl_c_exits_130_leaving_no_process(tmp_path):
    with training_on_a_terminal(tmp_path) as (process, master, seen):
        started = _training(process, master, seen)
        # The bar was up from the start, before the trainer had a step to count, and then counted them.
        assert b"0/400" in seen and seen.index(b"gpt2-tiny (starting)") < re.search(COUNTED_PAST_1, seen).start()
        process.send_signal(signal.SIGINT)
        status = _exit_status(process, master, seen, STOPPED_WITHIN_S)
        assert _alive(started) == []
        assert status == 130
        assert _last_line(master, seen) == INTERRUPTED
    assert not (tmp_path / "r.json").exists()


@pytest.fixture
def ranks_slow_to_stop(without_accelerators):
    """An environment in which the ranks ignore SIGTERM, as a trainer that saves a checkpoint on SIGTERM takes
    its time over it (slow_to_stop/sitecustomize.py)."""
    hook = Path(__file__).with_name("slow_to_stop")
    path = os.pathsep.join(filter(None, (str(hook), without_accelerators.get("PYTHONPATH"))))
    return {**without_accelerators, "PYTHONPATH": path}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ranks_that_ignore_sigterm_are_killed_when_the_grace_period_ends(tmp_path, ranks_slow_to_stop):
    with training_on_a_terminal(tmp_path, ranks_slow_to_stop) as (process, master, seen):
        started = _training(process, master, seen)
        interrupted = time.monotonic()
        process.send_signal(signal.SIGINT)
        status = _exit_status(process, master, seen, STOPPED_WITHIN_S)
        stopped = time.monotonic() - interrupted
        assert _alive(started) == []
        assert (status, _last_line(master, seen)) == (130, INTERRUPTED)
    assert stopped >= STOP_GRACE_S  # SIGTERM first, and the whole grace period to act on it


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_second_ctrl_c_kills_at_once(tmp_path, ranks_slow_to_stop):
    with training_on_a_terminal(tmp_path, ranks_slow_to_stop) as (process, master, seen):
        started = _training(process, master, seen)
        process.send_signal(signal.SIGINT)
        time.sleep(2)
        assert process.poll() is None and _alive(started)  # the first waits for the ranks
        process.send_signal(signal.SIGINT)
        status = _exit_status(process, master, seen, KILLED_WITHIN_S)
        assert _alive(started) == []
        assert (status, _last_line(master, seen)) == (130, INTERRUPTED)


def test_a_step_event_is_read_back_and_a_line_another_rank_wrote_into_is_not_one():
    assert parse_step_event(step_event(3, 10.25)) == (3, 10.25)
    assert parse_step_event("portlayer.train.step 3 10.25") == (3, 10.25)
    # the ranks share one pipe: rank 1's output on the same line leaves an ordinary line, echoed as it came
    assert parse_step_event("portlayer.train.step 3 10.25[W1123 rank 1] warning") is None
    assert parse_step_event("portlayer.train.step 3 10.25 model on musa") is None
    assert parse_step_event("[rank 0] loss 10.25") is None
